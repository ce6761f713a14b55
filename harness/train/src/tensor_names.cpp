#include "validate/train/tensor_names.hpp"

#include <cctype>

namespace validate::train {

std::string checkpoint_tensor(std::int64_t step, const std::string& tensor) {
  return "step" + std::to_string(step) + "_" + tensor;
}

std::optional<CheckpointName> parse_checkpoint_tensor(const std::string& name) {
  if (name.rfind("step", 0) != 0) return std::nullopt;
  std::size_t i = 4;
  const std::size_t digits = i;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == digits || i - digits > 9 || (name[digits] == '0' && i - digits > 1)) return std::nullopt;
  if (i + 1 >= name.size() || name[i] != '_') return std::nullopt;
  return CheckpointName{std::stoll(name.substr(digits, i - digits)), name.substr(i + 1)};
}

}  // namespace validate::train
