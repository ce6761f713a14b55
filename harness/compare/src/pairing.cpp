#include "validate/compare/pairing.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <set>

#include "validate/core/fs.hpp"
#include "validate/core/sha256.hpp"

namespace validate::compare {

namespace stdfs = std::filesystem;

namespace {

const char* const kDtypeDirs[] = {"float32", "bfloat16", "float16"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Reads a small JSON file of the run only after checking its bytes against the run's manifest.
Result<Json> read_listed_json(const RunDirectory& rd, const std::string& rel) {
  const std::string path = (stdfs::path(rd.root) / rel).string();
  auto text = fs::read_text(path);
  if (!text) return text.status();
  VALIDATE_TRY(check_listed_bytes(rd, rel, text->data(), text->size()));
  return parse_json(*text, path);
}

}  // namespace

Status check_listed_bytes(const RunDirectory& rd, const std::string& rel, const void* data, std::size_t size) {
  auto it = rd.files.find(rel);
  if (it == rd.files.end() || !it->is_object() || !it->contains("sha256"))
    return check_listed_digest(rd, rel, "");  // names the file as unlisted before hashing anything
  return check_listed_digest(rd, rel, sha256_hex(data, size));
}

Status check_listed_digest(const RunDirectory& rd, const std::string& rel, const std::string& got) {
  const std::string path = (stdfs::path(rd.root) / rel).string();
  auto it = rd.files.find(rel);
  if (it == rd.files.end() || !it->is_object() || !it->contains("sha256"))
    return Error{path + ": not listed in the run's manifest.json, so it is not part of the run"};
  const std::string want = (*it)["sha256"].get<std::string>();
  if (got != want)
    return Error{path + ": tampered: sha256 " + got.substr(0, 16) + "… but the run's manifest says " +
                 want.substr(0, 16) + "… (edited or replaced after the run)"};
  return Status::ok();
}

Result<RunDirectory> load_run_directory(const std::string& dir, const std::string& label) {
  std::error_code ec;
  if (!stdfs::is_directory(dir, ec)) return Error{dir + ": not a directory"};
  auto manifest = cases::read_manifest(dir);
  if (!manifest) return Error{"run directory " + manifest.message()};
  // A reference set given as the run paired nothing and passed as "all not run" (exit 0).
  if (manifest->value("format", std::string()) != cases::kRunFormat)
    return Error{(stdfs::path(dir) / "manifest.json").string() + ": format is \"" +
                 manifest->value("format", std::string()) + "\", not \"" + cases::kRunFormat +
                 "\": not a run directory (a reference set is compared against a run, not read as one)"};
  RunDirectory rd;
  rd.root = dir;
  rd.label = label;
  rd.files = (*manifest)["files"];
  const std::string info_path = (stdfs::path(dir) / "run_info.json").string();
  if (rd.files.contains("run_info.json")) {
    auto info = read_listed_json(rd, "run_info.json");
    if (!info) return info.status();
    if (!info->is_object()) return Error{info_path + ": not a JSON object"};
    if (info->contains("format") && (*info)["format"] != cases::kRunFormat)
      return Error{info_path + ": format is " + json_text((*info)["format"]) + ", expected \"" +
                   cases::kRunFormat + "\""};
    rd.run_info = *info;
  }
  for (const char* d : kDtypeDirs) {
    // Only the case files the manifest lists (a run directory is exactly what its manifest lists:
    // an older run's cases left beside it were paired and passed), each checked against its hash.
    std::vector<std::string> files;
    for (const auto& [rel, e] : rd.files.items())
      if (rel.rfind(std::string(d) + "/", 0) == 0 && rel.find('/', std::strlen(d) + 1) == std::string::npos &&
          ends_with(rel, "_run.json"))
        files.push_back(rel);
    std::sort(files.begin(), files.end());
    for (const auto& rel : files) {
      const std::string f = (stdfs::path(dir) / rel).string();
      auto j = read_listed_json(rd, rel);
      if (!j) return j.status();
      auto parsed = cases::case_record_from_json(*j, f);
      if (!parsed) return parsed.status();
      std::optional<RunCaseRecord> rc(RunCaseRecord{std::move(*parsed), rel});
      const std::string fname = stdfs::path(f).filename().string();
      const std::string from_name = fname.substr(0, fname.size() - std::string("_run.json").size());
      if (rc->case_name.empty()) rc->case_name = from_name;
      if (rc->case_name != from_name)
        return Error{f + ": \"case\" is \"" + rc->case_name + "\" but the file is named for " +
                     from_name};
      if (!rc->dtype.empty() && rc->dtype != d)
        return Error{f + ": \"dtype\" is \"" + rc->dtype + "\" but the file is in " + d + "/"};
      rc->dtype = d;
      rd.cases[rc->dtype + "/" + rc->case_name] = std::move(*rc);
    }
  }
  return rd;
}

Result<std::vector<RunDirectory>> load_run(const std::string& dir) {
  auto top = load_run_directory(dir, "");
  if (!top) return top.status();
  std::vector<RunDirectory> out;
  std::vector<RunDirectory> variants;
  {
    // Variants the top-level manifest lists (variants/<v>/manifest.json), in name order.
    std::vector<std::string> dirs;
    for (const auto& [rel, e] : top->files.items())
      if (rel.rfind("variants/", 0) == 0 && ends_with(rel, "/manifest.json") &&
          std::count(rel.begin(), rel.end(), '/') == 2) {
        const std::string vdir = rel.substr(0, rel.size() - std::string("/manifest.json").size());
        auto vm = fs::read_text((stdfs::path(dir) / rel).string());
        if (!vm) return vm.status();
        VALIDATE_TRY(check_listed_bytes(*top, rel, vm->data(), vm->size()));
        dirs.push_back((stdfs::path(dir) / vdir).string());
      }
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
      auto v = load_run_directory(d, stdfs::path(d).filename().string());
      if (!v) return v.status();
      if (v->run_info.contains("variant") && v->run_info["variant"].is_string())
        v->label = v->run_info["variant"].get<std::string>();
      variants.push_back(std::move(*v));
    }
  }
  if (!top->cases.empty() || variants.empty()) out.push_back(std::move(*top));
  for (auto& v : variants) out.push_back(std::move(v));
  return out;
}

std::string reference_input_hash(const Json& metadata, cases::Op op, const std::string& name) {
  std::string expected = cases::metadata_hash(metadata, op, name);
  if (expected.empty()) {
    const std::string opn = cases::op_name(op);
    const Json* ih = find_path(metadata, {"input_hashes", opn.c_str(), name.c_str()});
    if (ih && ih->is_string()) expected = ih->get<std::string>();
  }
  return expected;
}

const std::string* recorded_input_hash(const cases::OpRunRecord& opr, const std::string& name) {
  if (!opr.input_hashes) return nullptr;
  auto h = opr.input_hashes->find(name);
  return h == opr.input_hashes->end() ? nullptr : &h->second;
}

std::vector<PairItem> pair_run(const std::vector<cases::RefCase>& ref, const RunDirectory& run) {
  std::vector<PairItem> items;
  std::set<std::string> known_cases;
  for (const auto& rc : ref) {
    const std::string dt(dtype_name(rc.c.dtype));
    const std::string key = dt + "/" + rc.c.name;
    known_cases.insert(key);
    auto rit = run.cases.find(key);
    const RunCaseRecord* rcase = rit == run.cases.end() ? nullptr : &rit->second;
    for (const cases::OpInstance& inst : rc.c.ops) {
      const cases::Op op = inst.op();
      const std::string opn = cases::op_name(op);
      const auto tensors = rc.c.tensors(op);
      auto base = [&](PairItem::Kind k, const std::string& tensor, std::string msg) {
        PairItem it;
        it.kind = k;
        it.dtype = dt;
        it.case_name = rc.c.name;
        it.op = op;
        it.tensor = tensor;
        it.ref = &rc;
        it.run = rcase;
        it.message = std::move(msg);
        return it;
      };
      const cases::OpRunRecord* opr = rcase ? rcase->op(op) : nullptr;
      if (!opr) {
        for (const auto& t : tensors)
          if (t.role != cases::Role::input)
            items.push_back(base(
                PairItem::Kind::not_run, t.name,
                rcase ? "the run has no " + opn + " for this case" : "the run has no such case"));
        continue;
      }
      if (opr->outcome != cases::Outcome::ok) {
        PairItem it = base(PairItem::Kind::op_outcome, "",
                           std::string(cases::outcome_name(opr->outcome)) +
                               (opr->message.empty() ? "" : ": " + opr->message));
        it.outcome = opr->outcome;
        items.push_back(std::move(it));
        continue;
      }
      for (const auto& t : tensors) {
        if (t.role != cases::Role::input) continue;
        const std::string expected = reference_input_hash(rc.metadata, op, t.name);
        if (expected.empty()) continue;  // the reference cannot prove it; verify reports that
        const std::string* got = recorded_input_hash(*opr, t.name);
        if (!got)
          items.push_back(base(PairItem::Kind::input_hash, t.name,
                               "the run recorded no hash for input '" + t.name +
                                   "', so it cannot show it consumed the reference data"));
        else if (*got != expected)
          items.push_back(base(PairItem::Kind::input_hash, t.name,
                               "input hash mismatch: the run consumed different '" + t.name +
                                   "' data than the reference (run sha256 " +
                                   got->substr(0, 16) + "…, reference " +
                                   expected.substr(0, 16) + "…)"));
      }
      std::set<std::string> declared(opr->produced.begin(), opr->produced.end());
      std::set<std::string> names;
      for (const auto& t : tensors) {
        names.insert(t.name);
        if (!declared.count(t.name)) {
          const auto& left_out = opr->notes.not_requested;
          const bool asked = !left_out || std::find(left_out->begin(), left_out->end(), t.name) == left_out->end();
          if (t.role != cases::Role::input)
            items.push_back(asked ? base(PairItem::Kind::not_run, t.name,
                                         "not declared in \"produced\" by the runner")
                                  : base(PairItem::Kind::not_requested, t.name,
                                         "not requested: the run's layout file does not ask for it"));
          continue;
        }
        PairItem it = base(PairItem::Kind::tensor, t.name, "");
        // Always the canonical name: a metadata "file" is checked to be exactly this when the
        // set is loaded, and is never used to open anything (it pointed outside the set).
        const std::string file = rc.c.file_name(op, t.name);
        it.ref_file = (stdfs::path(rc.dtype_dir) / file).string();
        it.run_rel = dt + "/" + file;
        it.run_file = (stdfs::path(run.root) / it.run_rel).string();
        items.push_back(std::move(it));
      }
      for (const auto& p : opr->produced)
        if (!names.count(p))
          items.push_back(
              base(PairItem::Kind::unknown, p,
                   "the run declares tensor '" + p + "', which the reference does not have"));
    }
  }
  for (const auto& [key, rcase] : run.cases) {
    if (known_cases.count(key)) continue;
    PairItem it;
    it.kind = PairItem::Kind::unknown;
    it.dtype = rcase.dtype;
    it.case_name = rcase.case_name;
    it.run = &rcase;
    it.message = "the run has case " + key +
                 ", which the reference does not have (a run of another reference set?)";
    items.push_back(std::move(it));
  }
  return items;
}

}  // namespace validate::compare
