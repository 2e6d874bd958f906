// ioattn::ff::replay_epoch: Theorem 4.4's protocol replayed on one epoch of a recorded
// schedule, with the cache contents at the epoch's start taken from the trace
// Field: F_p (Q, K given, zero outside their stored patterns; the bilinear part S = Q K^T
//   only, no exp).
// Recorded state: acquire / release events open and close scopes of resident words (a release
//   frees the innermost scopes first). A read of Q or K belongs to the innermost open scope and
//   is held until the scope closes, or until a read of the same operand into that scope after a
//   later complete event replaces it (a streamed operand's next block). Held words may never
//   exceed the acquired words. The start state of epoch t is the state just before word t M
//   moves (a straddling read contributes its words before t M).
// Message: the Q, K words read in the epoch; the held words at the start that some product of
//   an entry of I_t uses and the epoch does not read; one partial sum per entry with a product
//   whose words are neither held at the start nor read in the epoch (the schedule must have
//   accumulated it before the start, so the cache holds it: held + partial sums <= resident
//   <= M). Thm 4.4: message <= 2M, which follows from these (start <= M, reads <= M) when the
//   recorded state is consistent. Bob recomputes S_ij = partial + the products he has words for.
// Ops: O(trace events + Q, K words read before the epoch's end + |I_t| d).
// Tests: tests/finite_field/epochs_test.cpp

#include "epoch_entries.hpp"

#include <ioattn/error.hpp>
#include <ioattn/ff/epochs.hpp>

#include <algorithm>
#include <string>

namespace ioattn::ff {

namespace {

// Word keys of the message: Q(i, c) -> i d + c, K(j, c) -> n_q d + j d + c.
struct Keys {
    std::int64_t n_q = 0;
    std::int64_t d = 0;

    [[nodiscard]] std::size_t q(std::int64_t i, std::int64_t c) const {
        return static_cast<std::size_t>(i * d + c);
    }

    [[nodiscard]] std::size_t k(std::int64_t j, std::int64_t c) const {
        return static_cast<std::size_t>(n_q * d + j * d + c);
    }
};

struct Held {
    Block block;
    std::int64_t words = 0;  // all its words
    std::int64_t before = 0; // of them, those moved before the epoch's start
    std::int64_t stamp = 0;  // complete events seen before the read
};

struct Scope {
    std::int64_t words = 0;
    std::vector<Held> reads;
};

// Alice's view of the epoch: the recorded start state, the epoch's reads and entries.
struct EpochView {
    std::vector<char> live; // by key: held at the start
    std::vector<char> read; // by key: read in the epoch
    std::vector<Entry> entries;
    std::int64_t resident = 0;
    std::int64_t live_words = 0;
    std::string failure;
};

class Walker {
public:
    Walker(const EpochShape& s, std::int64_t m, std::int64_t epoch, const detail::InnerDims& inner)
        : s_(s)
        , keys_{s.n_q, s.d}
        , inner_(inner)
        , p0_(epoch * m)
        , p1_((epoch + 1) * m)
        , m_(m)
        , epoch_(epoch) {
        const auto n = static_cast<std::size_t>((s.n_q + s.n_k) * s.d);
        v_.live.assign(n, 0);
        v_.read.assign(n, 0);
    }

    EpochView run(const std::vector<TraceEvent>& trace) {
        for (const TraceEvent& ev : trace) {
            const bool moves =
                ev.kind == TraceEvent::Kind::read || ev.kind == TraceEvent::Kind::write;
            if (moves && pos_ >= p1_)
                break; // the epoch is over (complete events at t M + M still belong to it)
            step(ev);
            if (!v_.failure.empty())
                return std::move(v_);
        }
        if (!snapped_)
            snapshot();
        return std::move(v_);
    }

private:
    void step(const TraceEvent& ev) {
        switch (ev.kind) {
        case TraceEvent::Kind::acquire:
            scopes_.push_back({ev.words, {}});
            resident_ += ev.words;
            return;
        case TraceEvent::Kind::release:
            release(ev.words);
            return;
        case TraceEvent::Kind::complete:
            complete(ev.block);
            return;
        case TraceEvent::Kind::read:
        case TraceEvent::Kind::write:
            move(ev);
            return;
        }
    }

    void release(std::int64_t w) {
        while (w > 0) {
            if (scopes_.empty())
                throw InvalidArgument("ioattn::ff::replay_epoch: a release of " +
                                      std::to_string(w) + " words more than acquired");
            Scope& top = scopes_.back();
            if (top.words > w) {
                top.words -= w;
                resident_ -= w;
                return;
            }
            w -= top.words;
            resident_ -= top.words;
            for (const Held& h : top.reads)
                held_ -= h.words;
            scopes_.pop_back();
        }
    }

    void complete(const Block& b) {
        detail::check_complete(b, s_.n_q, s_.n_k, "ioattn::ff::replay_epoch");
        ++completions_;
        if (detail::epoch_of(pos_, m_) != epoch_)
            return;
        detail::for_each_entry(b, s_.omega, [&](std::int64_t i, std::int64_t j) {
            if (inner_(i, j) > 0)
                v_.entries.push_back({i, j});
        });
    }

    void move(const TraceEvent& ev) {
        const std::int64_t n = ev.moved();
        const Block& b = ev.block;
        const bool qk = ev.kind == TraceEvent::Kind::read && b.slice == 0 &&
                        (b.operand == Operand::q || b.operand == Operand::k);
        if (!snapped_ && pos_ >= p0_) // the word at t M starts this event
            snapshot();
        if (qk)
            hold(b, n);
        if (!snapped_ && pos_ + n > p0_) // a straddling event: its words before t M are in
            snapshot();
        if (qk && v_.failure.empty() && pos_ + n > p0_) {
            const std::int64_t from = std::max(p0_ - pos_, std::int64_t{0});
            const std::int64_t to = std::min(p1_ - pos_, n);
            std::int64_t x = 0;
            detail::for_each_word(b, pattern(b.operand), to, [&](std::int64_t r, std::int64_t c) {
                if (x++ >= from)
                    v_.read[key(b.operand, r, c)] = 1;
            });
        }
        pos_ += n;
    }

    // A Q or K read: it replaces older blocks of its operand in its scope, then is held.
    void hold(const Block& b, std::int64_t n) {
        const std::int64_t rows = b.operand == Operand::q ? s_.n_q : s_.n_k;
        if (b.row0 < 0 || b.col0 < 0 || b.rows < 0 || b.cols < 0 || b.row0 + b.rows > rows ||
            b.col0 + b.cols > s_.d)
            throw InvalidArgument("ioattn::ff::replay_epoch: a read block lies outside Q or K");
        if (detail::stored_words(b, pattern(b.operand)) != n) {
            v_.failure = "a read of " + name(b) + " moves " + std::to_string(n) +
                         " words, the block stores " +
                         std::to_string(detail::stored_words(b, pattern(b.operand)));
            return;
        }
        if (scopes_.empty()) {
            v_.failure = "a read of " + name(b) + " outside any acquired scope";
            return;
        }
        auto& reads = scopes_.back().reads;
        const auto stale = [&](const Held& h) {
            return h.block.operand == b.operand && h.stamp < completions_;
        };
        for (const Held& h : reads)
            if (stale(h))
                held_ -= h.words;
        reads.erase(std::remove_if(reads.begin(), reads.end(), stale), reads.end());
        reads.push_back({b, n, std::clamp(p0_ - pos_, std::int64_t{0}, n), completions_});
        held_ += n;
        if (held_ > resident_)
            v_.failure = "the held Q, K words (" + std::to_string(held_) +
                         ") exceed the acquired words (" + std::to_string(resident_) +
                         ") after a read of " + name(b);
    }

    void snapshot() {
        snapped_ = true;
        v_.resident = resident_;
        for (const Scope& sc : scopes_)
            for (const Held& h : sc.reads) {
                v_.live_words += h.before;
                detail::for_each_word(h.block,
                                      pattern(h.block.operand),
                                      h.before,
                                      [&](std::int64_t r, std::int64_t c) {
                                          v_.live[key(h.block.operand, r, c)] = 1;
                                      });
            }
    }

    [[nodiscard]] const RowPattern* pattern(Operand op) const {
        return op == Operand::q ? s_.q : s_.k;
    }

    [[nodiscard]] std::size_t key(Operand op, std::int64_t r, std::int64_t c) const {
        return op == Operand::q ? keys_.q(r, c) : keys_.k(r, c);
    }

    static std::string name(const Block& b) {
        return std::string(b.operand == Operand::q ? "Q" : "K") + " rows [" +
               std::to_string(b.row0) + ", " + std::to_string(b.row0 + b.rows) + ") cols [" +
               std::to_string(b.col0) + ", " + std::to_string(b.col0 + b.cols) + ")";
    }

    const EpochShape& s_;
    Keys keys_;
    const detail::InnerDims& inner_;
    std::int64_t p0_, p1_, m_, epoch_;
    std::int64_t pos_ = 0, resident_ = 0, held_ = 0, completions_ = 0;
    bool snapped_ = false;
    std::vector<Scope> scopes_;
    EpochView v_;
};

// Bob: S_ij = partial_ij + the products whose words the message holds; "" when all match.
std::string recompute(const EpochView& v,
                      const Keys& keys,
                      const detail::InnerDims& inner,
                      const std::vector<std::int64_t>& message,
                      const std::vector<std::int64_t>& partial,
                      const Matrix& q,
                      const Matrix& k,
                      const Prime& p) {
    const auto have = [&](std::size_t key) { return v.read[key] != 0 || v.live[key] != 0; };
    for (std::size_t x = 0; x < v.entries.size(); ++x) {
        const Entry& e = v.entries[x];
        std::int64_t s = partial[x];
        std::int64_t truth = 0;
        std::string missing;
        inner.for_each_shared(e.row, e.col, [&](std::int64_t c) {
            truth = add_mod(truth, mul_mod(q(e.row, c), k(e.col, c), p), p);
            const std::size_t kq = keys.q(e.row, c), kk = keys.k(e.col, c);
            if (!have(kq) || !have(kk))
                return; // in the partial sum
            if (message[kq] < 0 || message[kk] < 0) {
                missing = "needs a word the message lacks";
                return;
            }
            s = add_mod(s, mul_mod(message[kq], message[kk], p), p); // S_ij += Q_ic K_jc
        });
        const std::string at =
            "entry (" + std::to_string(e.row) + ", " + std::to_string(e.col) + ")";
        if (!missing.empty())
            return at + " " + missing;
        if (s != truth)
            return at + " recomputed as " + std::to_string(s) + ", Q K^T has " +
                   std::to_string(truth);
    }
    return {};
}

} // namespace

ProtocolReplay replay_epoch(const std::vector<TraceEvent>& trace,
                            const EpochShape& shape,
                            const Matrix& q,
                            const Matrix& k,
                            std::int64_t m,
                            std::int64_t epoch,
                            const Prime& p) {
    constexpr const char* kWhere = "ioattn::ff::replay_epoch";
    shape.validate(kWhere);
    if (m < 1 || epoch < 0 || q.rows() != shape.n_q || k.rows() != shape.n_k ||
        q.cols() != shape.d || k.cols() != shape.d)
        throw InvalidArgument(
            std::string(kWhere) + ": M = " + std::to_string(m) +
            ", epoch = " + std::to_string(epoch) + ", Q " + std::to_string(q.rows()) + " x " +
            std::to_string(q.cols()) + ", K " + std::to_string(k.rows()) + " x " +
            std::to_string(k.cols()) +
            " (expected M >= 1, epoch >= 0, Q n_q x d and K n_k x d of the shape)");
    check_entries(q, p, kWhere);
    check_entries(k, p, kWhere);
    const Keys keys{shape.n_q, shape.d};
    const detail::InnerDims inner(shape);

    // --- Alice: walk the trace, the recorded start state, the epoch's reads and entries ---
    const EpochView v = Walker(shape, m, epoch, inner).run(trace);
    ProtocolReplay out;
    out.epoch = epoch;
    out.entries = static_cast<std::int64_t>(v.entries.size());
    out.resident_words = v.resident;
    out.live_words = v.live_words;
    out.read_words = std::count(v.read.begin(), v.read.end(), 1);
    if (!v.failure.empty()) {
        out.detail = v.failure;
        return out;
    }

    // --- the message: read words, used start words, one partial sum per entry that needs it ---
    std::vector<std::int64_t> message(v.read.size(), -1);
    std::vector<std::int64_t> partial(v.entries.size(), 0);
    const auto value = [&](std::size_t key) {
        const auto at = static_cast<std::int64_t>(key);
        return at < shape.n_q * shape.d ? q(at / shape.d, at % shape.d)
                                        : k(at / shape.d - shape.n_q, at % shape.d);
    };
    for (std::size_t key = 0; key < v.read.size(); ++key)
        if (v.read[key] != 0)
            message[key] = value(key);
    for (std::size_t x = 0; x < v.entries.size(); ++x) {
        const Entry& e = v.entries[x];
        bool needs_partial = false;
        inner.for_each_shared(e.row, e.col, [&](std::int64_t c) {
            const std::size_t kq = keys.q(e.row, c), kk = keys.k(e.col, c);
            const bool has_q = v.read[kq] != 0 || v.live[kq] != 0;
            const bool has_k = v.read[kk] != 0 || v.live[kk] != 0;
            if (has_q && has_k) { // Bob multiplies: send the start words he lacks
                for (std::size_t key : {kq, kk})
                    if (message[key] < 0) {
                        message[key] = value(key);
                        ++out.start_words;
                    }
                return;
            }
            needs_partial = true; // accumulated before the start
            partial[x] = add_mod(partial[x], mul_mod(q(e.row, c), k(e.col, c), p), p);
        });
        out.partial_sums += needs_partial ? 1 : 0;
    }
    out.message = out.read_words + out.start_words + out.partial_sums;
    out.start_fits =
        out.live_words + out.partial_sums <= out.resident_words && out.resident_words <= m;

    // --- Bob: every entry of I_t from the message alone, against Q K^T ---
    out.detail = recompute(v, keys, inner, message, partial, q, k, p);
    out.recomputed = out.detail.empty();
    if (out.recomputed && !out.start_fits)
        out.detail = "start state of " + std::to_string(out.live_words) + " held words + " +
                     std::to_string(out.partial_sums) + " partial sums, " +
                     std::to_string(out.resident_words) +
                     " words acquired (M = " + std::to_string(m) + "): the cache cannot hold it";
    if (out.recomputed && out.start_fits && out.message > 2 * m)
        out.detail = "message " + std::to_string(out.message) + " > 2M = " + std::to_string(2 * m);
    out.holds = out.detail.empty();
    return out;
}

ProtocolReplay replay_epoch(const std::vector<TraceEvent>& trace,
                            const Matrix& q,
                            const Matrix& k,
                            std::int64_t m,
                            std::int64_t epoch,
                            const Prime& p) {
    return replay_epoch(trace,
                        EpochShape{q.rows(), k.rows(), q.cols(), nullptr, nullptr, nullptr},
                        q,
                        k,
                        m,
                        epoch,
                        p);
}

} // namespace ioattn::ff
