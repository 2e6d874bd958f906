#pragma once
// Private MPI plumbing of ioattn::dist: the datatype of a scalar, collective validation (every
// rank learns that some rank rejected its arguments, so none waits for a message that will never
// come), and Channel, the counted and timed nonblocking messages of one pass.

#include <ioattn/bf16.hpp>
#include <ioattn/dist/comm_cost.hpp>
#include <ioattn/dist/shard.hpp>
#include <ioattn/parallel.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include <mpi.h>

namespace ioattn::dist::detail {

/// The MPI datatype of a scalar on the wire: MPI_FLOAT, MPI_DOUBLE, and MPI_UINT16_T for bf16
/// (its bits, moved as they are).
template <typename Scalar>
MPI_Datatype mpi_type();

/// Bytes of one element of an MPI datatype.
std::int64_t type_bytes(MPI_Datatype type);

/// Throws InvalidArgument naming `where` unless MPI is initialised (and not finalised) with at
/// least MPI_THREAD_FUNNELED and the caller is the main thread.
void require_mpi(std::string_view where);

/// Runs `check` on every rank of `comm`; if it threw on any rank, every rank throws: the rank
/// at fault rethrows its own exception, the others an InvalidArgument naming `where` and the
/// lowest rank at fault. Collective.
void agree(MPI_Comm comm, std::string_view where, const std::function<void()>& check);

/// Throws InvalidArgument naming `where` and `what` unless every rank of `comm` passed the same
/// values. Collective (two reductions); call inside agree().
void require_same(MPI_Comm comm,
                  std::span<const std::int64_t> values,
                  std::string_view where,
                  std::string_view what);

/// Throws InvalidArgument naming `where` if a message of `words` scalars exceeds MPI's int count.
void require_message_size(std::int64_t words, std::string_view where);

/// Counted, timed nonblocking messages of one pass, in a fixed set of request slots. Sent
/// words and bytes are counted when a send is posted; received ones when a receive completes,
/// from its status (what arrived, at its datatype's size). Waiting time is the communication that compute did not hide.
class Channel {
public:
    static constexpr int kSlots = 6;

    explicit Channel(MPI_Comm comm);
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    ~Channel(); ///< waits for anything still in flight (buffers must outlive the channel)

    [[nodiscard]] int rank() const { return rank_; }

    [[nodiscard]] int size() const { return size_; }

    [[nodiscard]] int next() const { return (rank_ + 1) % size_; }

    [[nodiscard]] int prev() const { return (rank_ + size_ - 1) % size_; }

    template <typename Scalar>
    void send(int slot, const Scalar* data, std::int64_t words, int to, int tag);

    template <typename Scalar>
    void receive(int slot, Scalar* data, std::int64_t words, int from, int tag);

    /// Lets MPI progress the messages in flight (called between pieces of compute).
    void poll();

    /// Blocks until the message in `slot` (if any) is complete; the time counts as waiting.
    void wait(int slot);

    [[nodiscard]] const CommReport& report() const { return report_; }

    [[nodiscard]] double wait_seconds() const { return wait_seconds_; }

    /// Runs compute(poll) so that the messages in flight progress meanwhile. `beside`: on
    /// another thread with `threads` oneTBB slots and poll = false, while this (MPI's main)
    /// thread polls with naps of 50 us that double up to 2 ms while nothing completes;
    /// otherwise here with poll = true, and compute calls poll() between its pieces.
    template <typename Fn>
    void overlap(bool beside, int threads, const Fn& compute) {
        if (!beside) {
            compute(true);
            return;
        }
        nap_us_ = kNapMinUs;
        run_beside(
            threads, [&] { compute(false); }, [this] { idle(); });
    }

    /// The pass's stats: these counts and waits, `kernel_calls`, and the time since `t0`
    /// (MPI_Wtime).
    [[nodiscard]] PassStats stats(std::int64_t kernel_calls, double t0) const {
        return {report_, MPI_Wtime() - t0, wait_seconds_, kernel_calls};
    }

private:
    struct Slot {
        MPI_Request request = MPI_REQUEST_NULL;
        MPI_Datatype type = MPI_DATATYPE_NULL;
        bool receive = false;
    };

    static constexpr int kNapMinUs = 50;
    static constexpr int kNapMaxUs = 2000;

    void idle(); ///< poll(), then nap (shorter after a completion or a new message)
    void post(int slot, MPI_Request request, MPI_Datatype type, bool receive);
    void completed(Slot& s, const MPI_Status& status);

    MPI_Comm comm_;
    int rank_ = 0;
    int size_ = 1;
    std::array<Slot, kSlots> slots_{};
    CommReport report_;
    double wait_seconds_ = 0;
    std::int64_t events_ = 0; ///< messages posted or completed: resets the nap
    std::int64_t events_seen_ = 0;
    int nap_us_ = kNapMinUs;
};

} // namespace ioattn::dist::detail
