// ioattn::dist::detail: MPI datatypes, collective validation and the counted Channel.

#include "channel.hpp"

#include <ioattn/error.hpp>
#include <ioattn/kernels/instantiate.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <exception>
#include <thread>
#include <vector>

namespace ioattn::dist::detail {

template <>
MPI_Datatype mpi_type<float>() {
    return MPI_FLOAT;
}

template <>
MPI_Datatype mpi_type<double>() {
    return MPI_DOUBLE;
}

template <>
MPI_Datatype mpi_type<bf16>() {
    return MPI_UINT16_T; // the 16 bits as they are: MPI has no bfloat16 type, and none is needed
}

std::int64_t type_bytes(MPI_Datatype type) {
    int size = 0;
    MPI_Type_size(type, &size);
    return size;
}

void require_mpi(std::string_view where) {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized == 0 || finalized != 0)
        throw InvalidArgument(std::string(where) +
                              ": MPI is not initialised (call MPI_Init_thread first)");
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_FUNNELED)
        throw InvalidArgument(std::string(where) + ": MPI thread level " + std::to_string(level) +
                              " (expected at least MPI_THREAD_FUNNELED = " +
                              std::to_string(MPI_THREAD_FUNNELED) + ")");
    int main = 0;
    MPI_Is_thread_main(&main);
    if (main == 0)
        throw InvalidArgument(std::string(where) +
                              ": called from a thread other than MPI's main thread "
                              "(MPI_THREAD_FUNNELED)");
}

void agree(MPI_Comm comm, std::string_view where, const std::function<void()>& check) {
    int size = 1;
    int rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    std::exception_ptr failure;
    try {
        check();
    } catch (...) {
        failure = std::current_exception();
    }
    const int mine = failure ? rank : size;
    int first = size;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (failure)
        std::rethrow_exception(failure);
    if (first < size)
        throw InvalidArgument(std::string(where) + ": rank " + std::to_string(first) +
                              " rejected its arguments (its own message says why)");
}

void require_same(MPI_Comm comm,
                  std::span<const std::int64_t> values,
                  std::string_view where,
                  std::string_view what) {
    std::vector<std::int64_t> lo(values.size());
    std::vector<std::int64_t> hi(values.size());
    const int n = static_cast<int>(values.size());
    MPI_Allreduce(values.data(), lo.data(), n, MPI_INT64_T, MPI_MIN, comm);
    MPI_Allreduce(values.data(), hi.data(), n, MPI_INT64_T, MPI_MAX, comm);
    for (std::size_t i = 0; i < values.size(); ++i)
        if (lo[i] != hi[i])
            throw InvalidArgument(std::string(where) + ": the ranks disagree on " +
                                  std::string(what) + " (field " + std::to_string(i) +
                                  " ranges from " + std::to_string(lo[i]) + " to " +
                                  std::to_string(hi[i]) + ")");
}

void require_message_size(std::int64_t words, std::string_view where) {
    if (words > INT_MAX)
        throw InvalidArgument(std::string(where) + ": a message of " + std::to_string(words) +
                              " words exceeds MPI's int count " + std::to_string(INT_MAX) +
                              " (use more ranks or a smaller batch)");
}

Channel::Channel(MPI_Comm comm)
    : comm_(comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
}

Channel::~Channel() {
    for (Slot& s : slots_)
        if (s.request != MPI_REQUEST_NULL)
            MPI_Wait(&s.request, MPI_STATUS_IGNORE);
}

template <typename Scalar>
void Channel::send(int slot, const Scalar* data, std::int64_t words, int to, int tag) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Isend(data, static_cast<int>(words), mpi_type<Scalar>(), to, tag, comm_, &r);
    report_.sent_words += words;
    report_.sent_bytes += words * static_cast<std::int64_t>(sizeof(Scalar));
    report_.sent_messages += 1;
    post(slot, r, mpi_type<Scalar>(), false);
}

template <typename Scalar>
void Channel::receive(int slot, Scalar* data, std::int64_t words, int from, int tag) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Irecv(data, static_cast<int>(words), mpi_type<Scalar>(), from, tag, comm_, &r);
    post(slot, r, mpi_type<Scalar>(), true);
}

void Channel::post(int slot, MPI_Request request, MPI_Datatype type, bool receive) {
    Slot& s = slots_[static_cast<std::size_t>(slot)];
    IOATTN_ASSERT(s.request == MPI_REQUEST_NULL);
    s = {request, type, receive};
    ++events_;
}

void Channel::completed(Slot& s, const MPI_Status& status) {
    ++events_;
    if (s.receive) {
        int count = 0;
        MPI_Get_count(&status, s.type, &count);
        report_.received_words += count;
        report_.received_bytes += count * type_bytes(s.type);
        report_.received_messages += 1;
    }
    s.receive = false;
}

void Channel::poll() {
    for (Slot& s : slots_) {
        if (s.request == MPI_REQUEST_NULL)
            continue;
        int done = 0;
        MPI_Status status;
        MPI_Test(&s.request, &done, &status);
        if (done != 0)
            completed(s, status);
    }
}

void Channel::idle() {
    poll();
    nap_us_ = events_ != events_seen_ ? kNapMinUs : std::min(2 * nap_us_, kNapMaxUs);
    events_seen_ = events_;
    std::this_thread::sleep_for(std::chrono::microseconds(nap_us_));
}

void Channel::wait(int slot) {
    Slot& s = slots_[static_cast<std::size_t>(slot)];
    if (s.request == MPI_REQUEST_NULL)
        return;
    const double t0 = MPI_Wtime();
    MPI_Status status;
    MPI_Wait(&s.request, &status);
    wait_seconds_ += MPI_Wtime() - t0;
    completed(s, status);
}

// every storage type travels (bf16 K/V rows and finished sums, fp32 partial sums with it)
#define IOATTN_INSTANTIATE(Scalar)                                                                 \
    template void Channel::send<Scalar>(int, const Scalar*, std::int64_t, int, int);               \
    template void Channel::receive<Scalar>(int, Scalar*, std::int64_t, int, int);
IOATTN_FOR_EACH_SCALAR(IOATTN_INSTANTIATE)
IOATTN_INSTANTIATE(bf16)
#undef IOATTN_INSTANTIATE

} // namespace ioattn::dist::detail
