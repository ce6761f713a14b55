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
#include "validate/core/fs.hpp"
#include "validate/core/output_dir.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/version.hpp"
#include "validate/runners/interrupt.hpp"

namespace validate::runners {

namespace {

namespace stdfs = std::filesystem;
using Clock = std::chrono::steady_clock;

// A variant name becomes a directory name: keep it readable but path-safe.
std::string variant_dir(const std::string& v) {
  std::string s;
  for (char ch : v) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == '=') ? ch : '_';
  return s;
}

struct VariantState {
  std::string root;                       // directory of this variant's run
  std::map<std::string, Json> case_docs;  // "<dtype>/<case>" -> <case>_run.json document
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

}  // namespace

Result<RunSummary> run_cases(Runner& runner, const RunOptions& opt, std::ostream& log) {
  auto t0 = Clock::now();
  auto manifest = cases::read_manifest(opt.ref);
  if (!manifest) return Error{"reference set " + opt.ref + ": " + manifest.message()};
  auto all = cases::load_cases(opt.ref);
  if (!all) return all.status();

  std::optional<std::regex> only;
  if (!opt.only.empty()) {
    try {
      only.emplace(opt.only);
    } catch (const std::regex_error& e) {
      return Error{"--only '" + opt.only + "': " + e.what()};
    }
  }
  std::vector<const cases::RefCase*> list;
  {
    std::vector<const cases::RefCase*> selected;
    for (const auto& rc : *all)
      if (!only || std::regex_search(std::string(dtype_name(rc.c.dtype)) + "/" + rc.c.name, *only)) selected.push_back(&rc);
    for (std::size_t i = 0; i < selected.size(); ++i)
      if (static_cast<int>(i % static_cast<std::size_t>(opt.shard.count)) == opt.shard.index) list.push_back(selected[i]);
  }
  if (list.empty()) return Error{"no case of " + opt.ref + " matches --only/--shard"};

  // The run directory holds exactly this run: not the reference set, not an older run's cases
  // (`run --out OLD --only x` kept 64 stale results that compare passed), one writer at a time.
  VALIDATE_TRY(runner.prepare());  // first: a bad option leaves no directory behind
  auto out_dir = fs::claim_output_dir(opt.out, {"--out", {opt.ref}, opt.overwrite, false});
  if (!out_dir) return out_dir.status();

  RunSummary sum;
  std::map<std::string, VariantState> variants;
  Json paths = Json::object();  // op -> info key ending in _path -> distinct values
  auto state_for = [&](const std::string& v) -> VariantState& {
    auto it = variants.find(v);
    if (it != variants.end()) return it->second;
    VariantState s;
    s.root = v.empty() ? opt.out : (stdfs::path(opt.out) / "variants" / variant_dir(v)).string();
    return variants.emplace(v, std::move(s)).first->second;
  };
  const bool tty = ::isatty(STDERR_FILENO);
  const bool live = opt.progress < 0 && tty;
  const bool plain = opt.progress == 1 || (opt.progress < 0 && !tty);
  Status write_error;
  double io_s = 0;  // reading (and hashing) inputs, writing results: the run summary's time split

  std::size_t idx = 0;
  for (const auto* rc : list) {
    if (interrupt_signal()) break;
    ++idx;
    const auto& c = rc->c;
    const std::string dt(dtype_name(c.dtype));
    const std::string key = dt + "/" + c.name;
    for (const cases::OpInstance& inst : c.ops) {
      if (interrupt_signal()) break;  // the rest of the case is not run either
      const cases::Op op = inst.op();
      const char* opn = cases::op_name(op);
      auto tc = Clock::now();
      // Inputs exactly as stored; their hashes are recorded so compare can prove both sides saw the same data.
      std::map<std::string, Tensor> inputs;
      Json consumed = Json::object();
      std::string load_error;
      const auto t_read = Clock::now();
      for (const auto& t : c.inputs(op)) {
        std::string path = rc->dtype_dir + "/" + c.file_name(op, t.name);
        auto tensor = npy::read(path);
        if (!tensor) {
          load_error = tensor.message();
          break;
        }
        if (tensor->shape() != t.shape) {
          load_error = path + ": shape " + shape_to_string(tensor->shape()) + " but metadata says " + shape_to_string(t.shape);
          break;
        }
        consumed[t.name] = tensor_sha256(*tensor);
        inputs.emplace(t.name, std::move(*tensor));
      }
      io_s += std::chrono::duration<double>(Clock::now() - t_read).count();
      std::vector<OpResult> results;
      if (!load_error.empty()) {
        OpResult r;
        r.outcome = RunOutcome::error;
        r.message = "cannot read reference input: " + load_error;
        results.push_back(std::move(r));
      } else {
        OpTask task;
        task.c = &c;
        task.op = op;
        for (auto& [k, v] : inputs) task.inputs[k] = &v;
        task.work_dir = (stdfs::path(opt.out) / "work" / dt / c.name / opn).string();
        try {
          results = runner.run(task);
        } catch (const std::exception& e) {
          // Runners report failures as values; an exception is a bug, but it must not stop the run.
          OpResult r;
          r.outcome = RunOutcome::error;
          r.message = std::string("runner threw: ") + e.what();
          results.clear();
          results.push_back(std::move(r));
        }
        if (results.empty()) {
          OpResult r;
          r.outcome = RunOutcome::error;
          r.message = "runner returned no result";
          results.push_back(std::move(r));
        }
      }
      const double elapsed = std::chrono::duration<double>(Clock::now() - tc).count();
      for (auto& r : results) {
        VariantState& vs = state_for(r.variant);
        Json& doc = vs.case_docs[key];
        doc["case"] = c.name;
        doc["dtype"] = dt;
        Json opj;
        opj["outcome"] = outcome_name(r.outcome);
        opj["message"] = r.message;
        opj["input_hashes"] = consumed;
        opj["info"] = r.info;
        opj["elapsed_s"] = elapsed;
        if (opt.layout_json.contains("ops") && opt.layout_json["ops"].contains(opn)) opj["layouts"] = opt.layout_json["ops"][opn];
        Json produced = Json::array();
        const auto t_write = Clock::now();
        if (r.outcome == RunOutcome::ok) {
          std::string dir = (stdfs::path(vs.root) / dt).string();
          Status st = fs::make_dirs(dir);
          for (auto& [name, t] : r.outputs) {
            if (!st) break;
            st = write_tensor_recorded(vs.root, dt + "/" + c.file_name(op, name), t, vs.files);
            produced.push_back(name);
          }
          if (!st) {
            opj["outcome"] = "error";
            opj["message"] = "writing results: " + st.message();
            r.outcome = RunOutcome::error;
            r.message = st.message();
            if (write_error) write_error = st;
          }
        }
        io_s += std::chrono::duration<double>(Clock::now() - t_write).count();
        opj["produced"] = produced;
        doc["ops"][opn] = opj;
        switch (r.outcome) {
          case RunOutcome::ok: ++sum.ok; break;
          case RunOutcome::error:
            ++sum.error;
            sum.failures.push_back(fmt::format("{} {}{}: {}", key, opn, r.variant.empty() ? "" : " [" + r.variant + "]", r.message));
            break;
          case RunOutcome::skipped: ++sum.skipped; break;
          case RunOutcome::unsupported: ++sum.unsupported; break;
        }
        ++vs.outcomes[outcome_name(r.outcome)];
        if (r.info.is_object()) {
          // How each op's tensors reached the backend ("native", "strided", "converted"), gathered
          // per op for run_info.json so a reader need not open every case file.
          for (auto& [k, v] : r.info.items())
            if (v.is_string() && k.size() > 5 && k.compare(k.size() - 5, 5, "_path") == 0) {
              Json& seen = paths[opn][k];
              if (std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
            }
          if (r.info.value("bitwise_deterministic", true) == false) {
            std::string tensors;
            for (const auto& t : r.info.value("nondeterministic_tensors", Json::array()))
              tensors += (tensors.empty() ? "" : ", ") + t.get<std::string>();
            sum.nondeterministic.push_back(fmt::format(
                "{} {}{}: {}", key, opn, r.variant.empty() ? "" : " [" + r.variant + "]", tensors));
          }
        }
      }
    }
    // Per-case documents are written as soon as the case is done, so a killed run keeps its cases.
    for (auto& [v, vs] : variants) {
      auto it = vs.case_docs.find(key);
      if (it == vs.case_docs.end()) continue;
      std::string dir = (stdfs::path(vs.root) / dt).string();
      Status st = fs::make_dirs(dir);
      if (st) st = write_recorded(vs.root, dt + "/" + c.name + "_run.json", it->second.dump(2) + "\n", vs.files);
      if (!st && write_error) write_error = st;
    }
    std::string line = fmt::format("[{}/{}] {} ({} ok, {} error so far)", idx, list.size(), key, sum.ok, sum.error);
    if (live) std::cerr << "\r\033[K" << line << std::flush;
    else if (plain) log << line << "\n";
  }
  if (live) std::cerr << "\n";
  if (!write_error) return Error{"writing the run directory " + opt.out + ": " + write_error.message()};
  sum.interrupted = interrupt_signal();

  // run_info.json and the manifest of each variant, then of the top level (last).
  auto ref_manifest_hash = sha256_file((stdfs::path(opt.ref) / "manifest.json").string());
  Json base;
  base["format"] = cases::kRunFormat;
  base["backend"] = runner.name();
  base["runner"] = runner.info();
  base["time_s"] = base["runner"].value("time_s", Json::object());  // runner: compute, conversion
  base["time_s"]["io"] = io_s;
  base["device"] = base["runner"].value("device", std::string("cpu"));
  base["math"] = base["runner"].value("math", std::string("n/a"));
  base["layout"] = opt.layout_json;
  base["layout"]["name"] = opt.layout_name;
  base["reference"] = {{"path", stdfs::absolute(opt.ref).lexically_normal().string()},
                       {"manifest_sha256", ref_manifest_hash ? *ref_manifest_hash : ""}};
  base["harness"] = {{"version", harness_version()}, {"git_commit", harness_git_commit()}};
  base["created_at"] = utc_timestamp();
  base["selection"] = {{"only", opt.only}, {"shard", fmt::format("{}/{}", opt.shard.index, opt.shard.count)}};
  if (!paths.empty()) base["paths"] = paths;
  base["nondeterministic"] = sum.nondeterministic;
  Json names = Json::array();
  for (auto& [v, vs] : variants)
    if (!v.empty()) names.push_back(v);
  if (sum.interrupted) base["interrupted"] = {{"signal", sum.interrupted}, {"cases_done", idx}, {"cases", list.size()}};
  VariantState& top_state = state_for("");
  for (auto& [v, vs] : variants) {
    if (v.empty()) continue;
    Json info = base;
    info["variant"] = v;
    info["summary"] = vs.outcomes;
    VALIDATE_TRY(write_recorded(vs.root, "run_info.json", info.dump(2) + "\n", vs.files));
    if (sum.interrupted) continue;  // no manifest: the run did not finish
    VALIDATE_TRY(cases::write_manifest(vs.root, cases::kRunFormat, vs.files));
    // The top-level manifest lists the variants' files too, their manifests included.
    const std::string prefix = "variants/" + variant_dir(v) + "/";
    for (const auto& [rel, e] : vs.files) top_state.files[prefix + rel] = e;
    const std::string vm = vs.root + "/manifest.json";
    auto h = sha256_file(vm);
    if (!h) return h.status();
    std::error_code ec;
    top_state.files[prefix + "manifest.json"] = {static_cast<std::uint64_t>(stdfs::file_size(vm, ec)), *h};
  }
  Json top = base;
  top["variants"] = names;
  top["summary"] = {{"ok", sum.ok}, {"error", sum.error}, {"skipped", sum.skipped}, {"unsupported", sum.unsupported}};
  VALIDATE_TRY(write_recorded(opt.out, "run_info.json", top.dump(2) + "\n", top_state.files));
  sum.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // Interrupted: no manifest, so no reader (compare, merge, verify) takes the run as complete.
  if (sum.interrupted) return sum;
  // The manifest lists what this run wrote, never the exec work directories (scratch).
  VALIDATE_TRY(cases::write_manifest(opt.out, cases::kRunFormat, top_state.files));
  return sum;
}

}  // namespace validate::runners
