// ioattn::IoReport printing.

#include <ioattn/io_counter.hpp>

#include <ostream>

namespace ioattn {

std::ostream& operator<<(std::ostream& os, const IoReport& r) {
    return os << "{reads " << r.reads << ", writes " << r.writes << ", total " << r.total()
              << ", peak " << r.peak << "}";
}

} // namespace ioattn
