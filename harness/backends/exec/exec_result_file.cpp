#include "exec_result_file.hpp"

#include <sys/stat.h>

#include <cstring>

#include <fmt/format.h>

#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/layout/convert.hpp"

namespace validate::runners::exec {

std::string describe(const Expected& e) {
  return fmt::format(
      "{} {} in layout {}", dtype_name(e.dtype),
      shape_to_string(layout::shape_in_layout(e.spec, e.info.canonical_axes, e.info.shape)),
      layout::to_string(e.spec));
}

// One result file -> canonical tensor. Messages start with the file name.
Result<Tensor> read_result(const std::string& dir, const Expected& e, bool npy_format) {
  const std::string path = dir + "/" + e.file;
  const Shape lshape = layout::shape_in_layout(e.spec, e.info.canonical_axes, e.info.shape);
  const bool scalar = e.info.role == cases::Role::loss;
  // lstat, not stat: a result that is a symlink (to /dev/zero, to a file outside the work dir)
  // or a FIFO is refused by name instead of being followed or blocking the read.
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Error{e.file + ": missing (the program did not write it)"};
  if (!S_ISREG(st.st_mode))
    return Error{e.file + ": " + (S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, socket or device") +
                 ", not a regular file (results are read only from regular files in the work directory)"};
  const auto size = static_cast<std::uint64_t>(st.st_size);

  Tensor laid;
  if (!npy_format) {
    const std::uint64_t want =
        static_cast<std::uint64_t>(shape_numel(lshape)) * dtype_size(e.dtype);
    if (size != want)
      return Error{fmt::format("{}: {} bytes, expected {} bytes ({}{})", e.file, size, want,
                               describe(e), scalar ? ": exactly one value" : "")};
    auto map = MappedFile::open(path);  // O_NOFOLLOW | O_NONBLOCK: no race to a FIFO or link
    if (!map) return Error{map.message()};
    if (map->size() != want) return Error{e.file + ": changed size while being read"};
    laid = Tensor(e.dtype, lshape);
    if (want) std::memcpy(laid.bytes(), map->data(), want);
    if (scalar) return laid;
    return layout::from_layout(laid, e.info.canonical_axes, e.info.shape, e.spec);
  }
  auto a = npy::read(path);  // its messages name the path
  if (!a) return Error{a.message()};
  if (a->dtype() != e.dtype)
    return Error{fmt::format("{}: dtype {}, expected {} ({})", e.file, dtype_name(a->dtype()),
                             dtype_name(e.dtype), describe(e))};
  if (scalar) {
    if (a->numel() != 1)
      return Error{fmt::format("{}: shape {}, expected exactly one value", e.file,
                               shape_to_string(a->shape()))};
    a->reshape({});
    return std::move(*a);
  }
  if (a->shape() != lshape)
    return Error{fmt::format("{}: shape {}, expected {} (the shape in the layout's axis order: {})",
                             e.file, shape_to_string(a->shape()), shape_to_string(lshape),
                             describe(e))};
  // npy::read returns the array in C order whatever its fortran_order flag: its indices are the
  // layout's axes, so it is the C-order version of the declared spec (flips included).
  const layout::Spec c_order{e.spec.axes, false, e.spec.flip};
  return layout::from_layout(*a, e.info.canonical_axes, e.info.shape, c_order);
}

}  // namespace validate::runners::exec
