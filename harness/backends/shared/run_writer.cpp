// RunWriter (run_writer.hpp): the files of a run and their manifests.
#include "run_writer.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "validate/core/fs.hpp"
#include "validate/core/no_links.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/output_dir.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/version.hpp"

namespace validate::runners::detail {

namespace stdfs = std::filesystem;

namespace {

// A variant name becomes a directory name: keep it readable but path-safe.
std::string variant_dir(const std::string& v) {
  std::string s;
  for (char ch : v) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == '=') ? ch : '_';
  return s;
}

// Every directory and file of the run is checked to hold no symbolic link below --out before it is
// made or written: a program the run executed may have planted one (no_links.hpp).
Status make_dirs_inside(const std::string& out, const std::string& dir) {
  VALIDATE_TRY(fs::refuse_links_below(out, dir));
  return fs::make_dirs(dir);
}

// Writes a text file of the run and records it for the manifest.
Status write_recorded(const std::string& out, const std::string& root, const std::string& rel, const std::string& text,
                      cases::FileMap& files) {
  const std::string path = (stdfs::path(root) / rel).string();
  VALIDATE_TRY(fs::refuse_links_below(out, path));
  VALIDATE_TRY(fs::write_atomic(path, text));
  files[rel] = {text.size(), sha256_hex(text.data(), text.size())};
  return Status::ok();
}

// Writes a result tensor and records its size and file hash.
Status write_tensor_recorded(const std::string& out, const std::string& root, const std::string& rel, const Tensor& t,
                             cases::FileMap& files) {
  const std::string path = (stdfs::path(root) / rel).string();
  VALIDATE_TRY(fs::refuse_links_below(out, path));
  auto w = npy::write_hashed(path, t);
  if (!w) return w.status();
  files[rel] = {w->size, w->sha256};
  return Status::ok();
}

}  // namespace

// Writes the op's results into its variant and records its outcome.
void RunWriter::record(const cases::RefCase& rc, cases::Op op, OpResult& r, const std::map<std::string, std::string>& consumed,
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
    Status st = make_dirs_inside(opt_.out, (stdfs::path(vs.root) / dt).string());
    for (auto& [name, t] : r.outputs) {
      if (!st) break;
      st = write_tensor_recorded(opt_.out, vs.root, dt + "/" + c.file_name(op, name), t, vs.files);
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
void RunWriter::write_case_records(const cases::Case& c) {
  const std::string dt(dtype_name(c.dtype));
  const std::string key = dt + "/" + c.name;
  for (auto& [v, vs] : variants_) {
    auto it = vs.records.find(key);
    if (it == vs.records.end()) continue;
    Status st = make_dirs_inside(opt_.out, (stdfs::path(vs.root) / dt).string());
    if (st) st = write_recorded(opt_.out, vs.root, dt + "/" + c.name + "_run.json", json_text(cases::to_json(it->second), 2) + "\n", vs.files);
    if (!st && write_error_) write_error_ = st;
  }
}

// run_info.json and the manifest of each variant, then of the top level (last). Interrupted:
// run_info.json only, so no reader (compare, merge, verify) takes the run as complete.
Status RunWriter::finish(const Runner& runner, std::size_t cases_done, std::size_t cases_total, Clock::time_point t0) {
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
    VALIDATE_TRY(write_recorded(opt_.out, vs.root, "run_info.json", json_text(info, 2) + "\n", vs.files));
    if (sum_.interrupted) continue;
    VALIDATE_TRY(fs::refuse_links_below(opt_.out, vs.root + "/manifest.json"));
    VALIDATE_TRY(cases::write_manifest(vs.root, cases::kRunFormat, vs.files));
    VALIDATE_TRY(list_variant_in_top(v, vs, top_state));
  }
  Json top = base;
  top["variants"] = names;
  top["summary"] = {{"ok", sum_.ok}, {"error", sum_.error}, {"skipped", sum_.skipped}, {"unsupported", sum_.unsupported}};
  VALIDATE_TRY(write_recorded(opt_.out, opt_.out, "run_info.json", json_text(top, 2) + "\n", top_state.files));
  sum_.seconds = seconds_since(t0);
  if (sum_.interrupted) return Status::ok();
  // The manifest lists what this run wrote, never the exec work directories (scratch).
  VALIDATE_TRY(fs::refuse_links_below(opt_.out, opt_.out + "/manifest.json"));
  return cases::write_manifest(opt_.out, cases::kRunFormat, top_state.files);
}

VariantState& RunWriter::state_for(const std::string& v) {
  auto it = variants_.find(v);
  if (it != variants_.end()) return it->second;
  VariantState s;
  s.root = v.empty() ? opt_.out : (stdfs::path(opt_.out) / "variants" / variant_dir(v)).string();
  return variants_.emplace(v, std::move(s)).first->second;
}

void RunWriter::count(const std::string& key, const char* opn, const OpResult& r, VariantState& vs) {
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

Json RunWriter::run_info_base(const Runner& runner, std::size_t cases_done, std::size_t cases_total) const {
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
Status RunWriter::list_variant_in_top(const std::string& v, const VariantState& vs, VariantState& top) {
  const std::string prefix = "variants/" + variant_dir(v) + "/";
  for (const auto& [rel, e] : vs.files) top.files[prefix + rel] = e;
  const std::string vm = vs.root + "/manifest.json";
  auto h = sha256_file(vm);
  if (!h) return h.status();
  std::error_code ec;
  top.files[prefix + "manifest.json"] = {static_cast<std::uint64_t>(stdfs::file_size(vm, ec)), *h};
  return Status::ok();
}

}  // namespace validate::runners::detail
