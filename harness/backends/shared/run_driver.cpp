#include "validate/backends/run_driver.hpp"

#include "run_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "validate/cases/refset.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/output_dir.hpp"
#include "validate/core/pattern.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"
#include "validate/core/version.hpp"
#include "validate/generate/inputs.hpp"
#include "validate/backends/interrupt.hpp"

namespace validate::runners {

namespace {

namespace stdfs = std::filesystem;
using detail::Clock;
using detail::RunWriter;
using detail::seconds_since;

OpResult failed(const std::string& message) {
  OpResult r;
  r.outcome = RunOutcome::error;
  r.message = message;
  return r;
}

// The cases --only and --shard select, in reference order.
Result<std::vector<const cases::RefCase*>> select_cases(const std::vector<cases::RefCase>& all, const RunOptions& opt) {
  std::optional<Pattern> only;
  if (!opt.only.empty()) {
    auto p = Pattern::compile(opt.only, "--only");
    if (!p) return p.status();
    only = std::move(*p);
  }
  std::vector<const cases::RefCase*> selected, list;
  for (const auto& rc : all)
    if (!only || only->search(std::string(dtype_name(rc.c.dtype)) + "/" + rc.c.name)) selected.push_back(&rc);
  for (std::size_t i = 0; i < selected.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(opt.shard.count)) == opt.shard.index) list.push_back(selected[i]);
  if (list.empty()) return Error{"no case of " + opt.ref + " matches --only/--shard"};
  return list;
}

// One op's reference inputs exactly as stored, with their hashes (compare proves from them that
// both sides saw the same data). Error: the first input that cannot be read or has the wrong shape.
struct OpInputs {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> hashes;
};
Result<OpInputs> read_op_inputs(const cases::RefCase& rc, cases::Op op) {
  OpInputs in;
  for (const auto& t : rc.c.inputs(op)) {
    const std::string path = rc.dtype_dir + "/" + rc.c.file_name(op, t.name);
    auto tensor = npy::read(path);
    if (!tensor) return tensor.status();
    if (tensor->shape() != t.shape)
      return Error{path + ": shape " + shape_to_string(tensor->shape()) + " but metadata says " + shape_to_string(t.shape)};
    in.hashes[t.name] = tensor_sha256(*tensor);
    in.tensors.emplace(t.name, std::move(*tensor));
  }
  return in;
}

// What generate drew the inputs from: a training case's later batches are drawn the same way
// (docs/training.md), from the seed and fill of the set's config.json.
struct DrawKey {
  std::uint64_t seed = 0;
  generate::Fill fill = generate::Fill::random;
};
Result<std::optional<DrawKey>> training_draw_key(const std::string& ref, const Json& manifest,
                                                 const std::vector<const cases::RefCase*>& list) {
  if (std::none_of(list.begin(), list.end(), [](const cases::RefCase* rc) { return rc->c.train.has_value(); }))
    return std::optional<DrawKey>{};
  const std::string path = ref + "/config.json";
  const Json* files = find_path(manifest, {"files"});
  if (!files || !files->contains("config.json"))
    return Error{path + ": the set has training cases, whose later batches are drawn from its seed, but its manifest "
                 "lists no config.json"};
  auto config = read_json(path);
  if (!config) return config.status();
  const Json* seed = find_path(*config, {"seed"});
  const Json* fill = find_path(*config, {"fill"});
  if (!seed || !seed->is_number_unsigned() || !fill || !fill->is_string() ||
      (*fill != "random" && *fill != "exact"))
    return Error{path + ": a set with training cases needs \"seed\" (an unsigned integer) and \"fill\" "
                 "(\"random\" or \"exact\")"};
  return std::optional<DrawKey>{DrawKey{seed->get<std::uint64_t>(),
                                        *fill == "exact" ? generate::Fill::exact : generate::Fill::random}};
}

// The runner's results for one op; never empty. Runners report failures as values: an exception
// is a bug, but it must not stop the run.
std::vector<OpResult> run_op(Runner& runner, const OpTask& task) {
  std::vector<OpResult> results;
  try {
    results = runner.run(task);
  } catch (const std::exception& e) {
    results.clear();
    results.push_back(failed(std::string("runner threw: ") + e.what()));
  }
  if (results.empty()) results.push_back(failed("runner returned no result"));
  return results;
}

// Progress on stderr: one rewritten line on a terminal, plain lines otherwise (or with --progress).
class Progress {
 public:
  Progress(int mode, std::ostream& log) : log_(log) {
    const bool tty = ::isatty(STDERR_FILENO);
    live_ = mode < 0 && tty;
    plain_ = mode == 1 || (mode < 0 && !tty);
  }
  void line(const std::string& text) {
    if (live_) std::cerr << "\r\033[K" << text << std::flush;
    else if (plain_) log_ << text << "\n";
  }
  void done() {
    if (live_) std::cerr << "\n";
  }

 private:
  std::ostream& log_;
  bool live_ = false, plain_ = false;
};

}  // namespace

Result<RunSummary> run_cases(Runner& runner, const RunOptions& opt, std::ostream& log) {
  const auto t0 = Clock::now();
  auto manifest = cases::read_manifest(opt.ref);
  if (!manifest) return Error{"reference set " + opt.ref + ": " + manifest.message()};
  auto all = cases::load_cases(opt.ref);
  if (!all) return all.status();
  auto list = select_cases(*all, opt);
  if (!list) return list.status();
  auto draw_key = training_draw_key(opt.ref, *manifest, *list);
  if (!draw_key) return draw_key.status();

  // The run directory holds exactly this run: not the reference set, not an older run's cases
  // (`run --out OLD --only x` kept 64 stale results that compare passed), one writer at a time.
  VALIDATE_TRY(runner.prepare());  // first: a bad option leaves no directory behind
  auto out_dir = fs::claim_output_dir(opt.out, {"--out", {opt.ref}, opt.overwrite, false});
  if (!out_dir) return out_dir.status();

  RunSummary sum;
  RunWriter writer(opt, sum);
  Progress progress(opt.progress, log);
  std::size_t idx = 0;
  for (const auto* rc : *list) {
    if (interrupt_signal()) break;
    ++idx;
    const auto& c = rc->c;
    const std::string dt(dtype_name(c.dtype));
    for (const cases::OpInstance& inst : c.ops) {
      if (interrupt_signal()) break;  // the rest of the case is not run either
      const cases::Op op = inst.op();
      const auto tc = Clock::now();
      auto inputs = read_op_inputs(*rc, op);
      writer.add_io_seconds(seconds_since(tc));
      std::vector<OpResult> results;
      if (!inputs) {
        results.push_back(failed("cannot read reference input: " + inputs.message()));
      } else {
        OpTask task;
        task.c = &c;
        task.op = op;
        for (auto& [k, v] : inputs->tensors) task.inputs[k] = &v;
        task.work_dir = (stdfs::path(opt.out) / "work" / dt / c.name / cases::op_name(op)).string();
        task.run_dir = opt.out;
        if (c.train && *draw_key) {
          const DrawKey key = **draw_key;
          task.step_inputs = [&c, op, key](std::int64_t step) {
            return generate::make_inputs(c, op, key.seed, key.fill, 0, step);
          };
        }
        results = run_op(runner, task);
      }
      const double elapsed = seconds_since(tc);
      const std::map<std::string, std::string> no_hashes;
      for (auto& r : results) writer.record(*rc, op, r, inputs ? inputs->hashes : no_hashes, elapsed);
    }
    writer.write_case_records(c);
    progress.line(fmt::format("[{}/{}] {}/{} ({} ok, {} error so far)", idx, list->size(), dt, c.name, sum.ok, sum.error));
  }
  progress.done();
  if (!writer.write_error()) return Error{"writing the run directory " + opt.out + ": " + writer.write_error().message()};
  sum.interrupted = interrupt_signal();
  VALIDATE_TRY(writer.finish(runner, idx, list->size(), t0));
  return sum;
}

}  // namespace validate::runners
