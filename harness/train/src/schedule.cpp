#include "validate/train/schedule.hpp"

#include <cmath>
#include <limits>
#include <set>

namespace validate::train {

namespace {

Status read_number(const Json& j, const char* key, double& out, const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  if (!j[key].is_number()) return Error{where + ": \"" + key + "\" must be a number, not " + json_text(j[key])};
  out = j[key].get<double>();
  if (!std::isfinite(out) || out < 0) return Error{where + ": \"" + key + "\" must be finite and >= 0, not " + json_text(j[key])};
  return Status::ok();
}

Status read_count(const Json& j, const char* key, std::int64_t& out, std::int64_t lo, std::int64_t hi,
                  const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  if (!j[key].is_number_integer())
    return Error{where + ": \"" + key + "\" must be an integer, not " + json_text(j[key])};
  const auto v = j[key].get<std::int64_t>();
  if (v < lo || v > hi)
    return Error{where + ": \"" + key + "\" is " + std::to_string(v) + "; it must be in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]"};
  out = v;
  return Status::ok();
}

}  // namespace

Result<TrainConfig> read_train_config(const Json& j, const std::string& where) {
  if (!j.is_object()) return Error{where + ": \"train\" must be an object"};
  static const std::set<std::string> kKeys = {"steps", "optimizer", "lr", "momentum", "dampening", "weight_decay",
                                              "nesterov", "checkpoint_every", "betas", "eps"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kKeys.count(it.key())) return Error{where + ": unknown key \"" + it.key() + "\" in \"train\""};
  TrainConfig c;
  if (!j.contains("steps")) return Error{where + ": \"train\" needs \"steps\""};
  VALIDATE_TRY(read_count(j, "steps", c.steps, 1, kMaxSteps, where));
  if (j.contains("optimizer")) {
    const std::string o = j["optimizer"].is_string() ? j["optimizer"].get<std::string>() : "";
    if (o == "sgd") c.optimizer = Optimizer::sgd;
    else if (o == "adam") c.optimizer = Optimizer::adam;
    else
      return Error{where + ": \"optimizer\" is " + json_text(j["optimizer"]) + "; the supported optimizers are \"sgd\" and \"adam\""};
  }
  // A key of the other optimizer would be ignored silently: refuse it.
  for (const char* k : c.optimizer == Optimizer::adam ? std::vector<const char*>{"momentum", "dampening", "nesterov"}
                                                      : std::vector<const char*>{"betas", "eps"})
    if (j.contains(k))
      return Error{where + ": \"" + k + "\" does not apply to \"optimizer\": \"" + optimizer_name(c.optimizer) + "\""};
  if (j.contains("betas")) {
    const Json& b = j["betas"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number())
      return Error{where + ": \"betas\" must be two numbers [beta1, beta2], not " + json_text(b)};
    c.beta1 = b[0].get<double>();
    c.beta2 = b[1].get<double>();
    for (double v : {c.beta1, c.beta2})
      if (!(v >= 0 && v < 1)) return Error{where + ": \"betas\" must be in [0, 1), not " + json_text(b)};
  }
  // eps is added in float32 by the float32 stacks: one that rounds to 0 there (1e-300 did) lets
  // Adam divide 0 by 0. One message for 0, negatives and such underflows.
  if (j.contains("eps") && j["eps"].is_number() &&
      !(j["eps"].get<double>() >= static_cast<double>(std::numeric_limits<float>::min()) &&
        std::isfinite(j["eps"].get<double>())))
    return Error{where + ": \"eps\" must be > 0 and at least float32's smallest normal 1.18e-38 (it keeps Adam's "
                         "denominator away from 0, in float32 too), not " + json_text(j["eps"])};
  VALIDATE_TRY(read_number(j, "eps", c.eps, where));
  VALIDATE_TRY(read_number(j, "lr", c.lr, where));
  VALIDATE_TRY(read_number(j, "momentum", c.momentum, where));
  VALIDATE_TRY(read_number(j, "dampening", c.dampening, where));
  VALIDATE_TRY(read_number(j, "weight_decay", c.weight_decay, where));
  if (j.contains("nesterov")) {
    if (!j["nesterov"].is_boolean()) return Error{where + ": \"nesterov\" must be true or false"};
    c.nesterov = j["nesterov"].get<bool>();
  }
  VALIDATE_TRY(read_count(j, "checkpoint_every", c.checkpoint_every, 0, kMaxSteps, where));
  if (c.lr == 0) return Error{where + ": \"lr\" is 0: every step would leave the parameters as they are"};
  if (c.nesterov && (c.momentum == 0 || c.dampening != 0))
    return Error{where + ": Nesterov momentum needs \"momentum\" > 0 and \"dampening\" 0 (as torch.optim.SGD)"};
  return c;
}

const char* optimizer_name(Optimizer o) { return o == Optimizer::adam ? "adam" : "sgd"; }

Json to_json(const TrainConfig& c) {
  // Each optimizer's own keys only (an SGD set's metadata is what it was before Adam existed).
  if (c.optimizer == Optimizer::adam)
    return {{"steps", c.steps}, {"optimizer", "adam"}, {"lr", c.lr}, {"betas", {c.beta1, c.beta2}},
            {"eps", c.eps},     {"weight_decay", c.weight_decay}, {"checkpoint_every", c.checkpoint_every}};
  return {{"steps", c.steps},          {"optimizer", "sgd"}, {"lr", c.lr},
          {"momentum", c.momentum},    {"dampening", c.dampening}, {"weight_decay", c.weight_decay},
          {"nesterov", c.nesterov},    {"checkpoint_every", c.checkpoint_every}};
}

std::vector<std::int64_t> checkpoint_steps(const TrainConfig& c) {
  // Step 1 always: the first step whose parameters an update produced, where a wrong update shows
  // alone (a dW applied in the filter layout) before later steps compound it. Step 2 always: the
  // first update that reads the optimizer's state, recomputable from steps 0 and 1 alone
  // (compare's check_own_update), where weight decay applied after the momentum first differs.
  std::set<std::int64_t> s = {0, c.steps - 1};
  if (c.steps > 1) s.insert(1);
  if (c.steps > 2) s.insert(2);
  if (c.checkpoint_every > 0)
    for (std::int64_t k = c.checkpoint_every; k < c.steps; k += c.checkpoint_every) s.insert(k);
  return {s.begin(), s.end()};
}

}  // namespace validate::train
