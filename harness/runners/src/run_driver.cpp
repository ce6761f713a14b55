#include "validate/runners/run_driver.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "validate/cases/refset.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/output_dir.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/version.hpp"
#include "validate/generate/inputs.hpp"
#include "validate/runners/interrupt.hpp"

namespace validate::runners {

namespace {

namespace stdfs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A variant name becomes a directory name: keep it readable but path-safe.
std::string variant_dir(const std::string& v) {
  std::string s;
  for (char ch : v) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == '=') ? ch : '_';
  return s;
}

struct VariantState {
  std::string root;                                  // directory of this variant's run
  std::map<std::string, cases::CaseRunRecord> records;  // "<dtype>/<case>" -> <case>_run.json
  std::map<std::string, int> outcomes;
  // What this run wrote, relative to root: the manifest lists exactly these. Hashing the tree
  // instead hashed whatever else was there (a 3 GB unrelated file, a 10 GB file a program left
  // in its work dir: 31 s and 10.8 GB resident; issue 10).
  cases::FileMap files;
};

// Writes a text file of the run and records it for the manifest.
Status write_recorded(const std::string& root, const std::string& rel, const std::string& text, cases::FileMap& files) {
  VALIDATE_TRY(fs::write_atomic((stdfs::path(root) / rel).string(), text));
  files[rel] = {text.size(), sha256_hex(text.data(), text.size())};
  return Status::ok();
}

// Writes a result tensor and records its size and file hash.
Status write_tensor_recorded(const std::string& root, const std::string& rel, const Tensor& t, cases::FileMap& files) {
  auto w = npy::write_hashed((stdfs::path(root) / rel).string(), t);
  if (!w) return w.status();
  files[rel] = {w->size, w->sha256};
  return Status::ok();
}

OpResult failed(const std::string& message) {
  OpResult r;
  r.outcome = RunOutcome::error;
  r.message = message;
  return r;
}

// The cases --only and --shard select, in reference order.
Result<std::vector<const cases::RefCase*>> select_cases(const std::vector<cases::RefCase>& all, const RunOptions& opt) {
  std::optional<std::regex> only;
  if (!opt.only.empty()) {
    try {
      only.emplace(opt.only);
    } catch (const std::regex_error& e) {
      return Error{"--only '" + opt.only + "': " + e.what()};
    }
  }
  std::vector<const cases::RefCase*> selected, list;
  for (const auto& rc : all)
    if (!only || std::regex_search(std::string(dtype_name(rc.c.dtype)) + "/" + rc.c.name, *only)) selected.push_back(&rc);
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

// Everything one `run` accumulates: per-variant records and files, the summary, the time split.
class RunWriter {
 public:
  RunWriter(const RunOptions& opt, RunSummary& sum) : opt_(opt), sum_(sum) {}

  // Writes the op's results into its variant and records its outcome.
  void record(const cases::RefCase& rc, cases::Op op, OpResult& r, const std::map<std::string, std::string>& consumed,
              double elapsed) {
    const auto& c = rc.c;
    const std::string dt(dtype_name(c.dtype));
    const std::string key = dt + "/" + c.name;
    const char* opn = cases::op_name(op);
    VariantState& vs = state_for(r.variant);
    cases::CaseRunRecord& doc = vs.records[key];
    doc.case_name = c.name;
    doc.dtype = dt;
    cases::OpRunRecord rec;
    rec.input_hashes = consumed;
    rec.elapsed_s = elapsed;
    if (opt_.layout_json.contains("ops") && opt_.layout_json["ops"].contains(opn))
      rec.layouts = opt_.layout_json["ops"][opn].get<std::map<std::string, std::string>>();
    const auto t_write = Clock::now();
    if (r.outcome == RunOutcome::ok) {
      Status st = fs::make_dirs((stdfs::path(vs.root) / dt).string());
      for (auto& [name, t] : r.outputs) {
        if (!st) break;
        st = write_tensor_recorded(vs.root, dt + "/" + c.file_name(op, name), t, vs.files);
        rec.produced.push_back(name);
      }
      if (!st) {
        r.outcome = RunOutcome::error;
        r.message = "writing results: " + st.message();
        if (write_error_) write_error_ = st;
      }
    }
    io_s_ += seconds_since(t_write);
    rec.outcome = r.outcome;
    rec.message = r.message;
    rec.notes = r.notes;
    rec.notes.extra = r.info;
    count(key, opn, r, vs);
    doc.ops[op] = std::move(rec);
  }

  // Per-case documents are written as soon as the case is done, so a killed run keeps its cases.
  void write_case_records(const cases::Case& c) {
    const std::string dt(dtype_name(c.dtype));
    const std::string key = dt + "/" + c.name;
    for (auto& [v, vs] : variants_) {
      auto it = vs.records.find(key);
      if (it == vs.records.end()) continue;
      Status st = fs::make_dirs((stdfs::path(vs.root) / dt).string());
      if (st) st = write_recorded(vs.root, dt + "/" + c.name + "_run.json", cases::to_json(it->second).dump(2) + "\n", vs.files);
      if (!st && write_error_) write_error_ = st;
    }
  }

  void add_io_seconds(double s) { io_s_ += s; }
  const Status& write_error() const { return write_error_; }

  // run_info.json and the manifest of each variant, then of the top level (last). Interrupted:
  // run_info.json only, so no reader (compare, merge, verify) takes the run as complete.
  Status finish(const Runner& runner, std::size_t cases_done, std::size_t cases_total, Clock::time_point t0) {
    const Json base = run_info_base(runner, cases_done, cases_total);
    Json names = Json::array();
    for (auto& [v, vs] : variants_)
      if (!v.empty()) names.push_back(v);
    VariantState& top_state = state_for("");
    for (auto& [v, vs] : variants_) {
      if (v.empty()) continue;
      Json info = base;
      info["variant"] = v;
      info["summary"] = vs.outcomes;
      VALIDATE_TRY(write_recorded(vs.root, "run_info.json", info.dump(2) + "\n", vs.files));
      if (sum_.interrupted) continue;
      VALIDATE_TRY(cases::write_manifest(vs.root, cases::kRunFormat, vs.files));
      VALIDATE_TRY(list_variant_in_top(v, vs, top_state));
    }
    Json top = base;
    top["variants"] = names;
    top["summary"] = {{"ok", sum_.ok}, {"error", sum_.error}, {"skipped", sum_.skipped}, {"unsupported", sum_.unsupported}};
    VALIDATE_TRY(write_recorded(opt_.out, "run_info.json", top.dump(2) + "\n", top_state.files));
    sum_.seconds = seconds_since(t0);
    if (sum_.interrupted) return Status::ok();
    // The manifest lists what this run wrote, never the exec work directories (scratch).
    return cases::write_manifest(opt_.out, cases::kRunFormat, top_state.files);
  }

 private:
  VariantState& state_for(const std::string& v) {
    auto it = variants_.find(v);
    if (it != variants_.end()) return it->second;
    VariantState s;
    s.root = v.empty() ? opt_.out : (stdfs::path(opt_.out) / "variants" / variant_dir(v)).string();
    return variants_.emplace(v, std::move(s)).first->second;
  }

  void count(const std::string& key, const char* opn, const OpResult& r, VariantState& vs) {
    const std::string where = fmt::format("{} {}{}", key, opn, r.variant.empty() ? "" : " [" + r.variant + "]");
    switch (r.outcome) {
      case RunOutcome::ok: ++sum_.ok; break;
      case RunOutcome::error:
        ++sum_.error;
        sum_.failures.push_back(where + ": " + r.message);
        break;
      case RunOutcome::skipped: ++sum_.skipped; break;
      case RunOutcome::unsupported: ++sum_.unsupported; break;
    }
    ++vs.outcomes[outcome_name(r.outcome)];
    // How each op's tensors reached the backend ("native", "strided", "converted"), gathered per
    // op for run_info.json so a reader need not open every case file.
    for (const auto& [tensor, how] : r.notes.paths) {
      Json& seen = paths_[opn][tensor + "_path"];
      if (std::find(seen.begin(), seen.end(), how) == seen.end()) seen.push_back(how);
    }
    if (r.notes.bitwise_deterministic == false) {
      std::string tensors;
      for (const auto& t : r.notes.nondeterministic_tensors) tensors += (tensors.empty() ? "" : ", ") + t;
      sum_.nondeterministic.push_back(where + ": " + tensors);
    }
  }

  Json run_info_base(const Runner& runner, std::size_t cases_done, std::size_t cases_total) const {
    auto ref_manifest_hash = sha256_file((stdfs::path(opt_.ref) / "manifest.json").string());
    Json base;
    base["format"] = cases::kRunFormat;
    base["backend"] = runner.name();
    base["runner"] = runner.info();
    base["time_s"] = base["runner"].value("time_s", Json::object());  // runner: compute, conversion
    base["time_s"]["io"] = io_s_;
    base["device"] = base["runner"].value("device", std::string("cpu"));
    base["math"] = base["runner"].value("math", std::string("n/a"));
    base["layout"] = opt_.layout_json;
    base["layout"]["name"] = opt_.layout_name;
    base["reference"] = {{"path", stdfs::absolute(opt_.ref).lexically_normal().string()},
                         {"manifest_sha256", ref_manifest_hash ? *ref_manifest_hash : ""}};
    base["harness"] = {{"version", harness_version()}, {"git_commit", harness_git_commit()}};
    base["created_at"] = utc_timestamp();
    base["selection"] = {{"only", opt_.only}, {"shard", fmt::format("{}/{}", opt_.shard.index, opt_.shard.count)}};
    if (!paths_.empty()) base["paths"] = paths_;
    base["nondeterministic"] = sum_.nondeterministic;
    if (sum_.interrupted)
      base["interrupted"] = {{"signal", sum_.interrupted}, {"cases_done", cases_done}, {"cases", cases_total}};
    return base;
  }

  // The top-level manifest lists the variants' files too, their manifests included.
  static Status list_variant_in_top(const std::string& v, const VariantState& vs, VariantState& top) {
    const std::string prefix = "variants/" + variant_dir(v) + "/";
    for (const auto& [rel, e] : vs.files) top.files[prefix + rel] = e;
    const std::string vm = vs.root + "/manifest.json";
    auto h = sha256_file(vm);
    if (!h) return h.status();
    std::error_code ec;
    top.files[prefix + "manifest.json"] = {static_cast<std::uint64_t>(stdfs::file_size(vm, ec)), *h};
    return Status::ok();
  }

  const RunOptions& opt_;
  RunSummary& sum_;
  std::map<std::string, VariantState> variants_;
  Json paths_ = Json::object();  // op -> "<tensor>_path" -> distinct values
  Status write_error_;
  double io_s_ = 0;  // reading (and hashing) inputs, writing results: the run summary's time split
};

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
