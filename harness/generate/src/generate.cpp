#include "validate/generate/generate.hpp"

#include <sys/resource.h>
#include <sys/utsname.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "validate/cases/readme.hpp"
#include "validate/cases/refset.hpp"
#include "validate/cases/scale_file.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/output_dir.hpp"
#include "validate/core/tree.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"
#include "validate/core/version.hpp"
#include "validate/generate/set_writer.hpp"
#include "validate/generate/torch_reference.hpp"
#include "validate/ops/registry.hpp"

namespace validate::generate {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

Json system_info(const TorchDevice& dev) {
  Json j = torch_system_info(dev);
  struct utsname u;
  if (::uname(&u) == 0) j["os"] = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  j["cpu"] = cpu_model();
#if defined(__clang__)
  j["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  j["compiler"] = std::string("gcc ") + __VERSION__;
#endif
  j["harness"] = {{"version", harness_version()}, {"git_commit", harness_git_commit()}};
  j["created_at"] = utc_timestamp();
  return j;
}

std::string human_bytes(double b) {
  const char* u[] = {"B", "KB", "MB", "GB", "TB"};
  int i = 0;
  while (b >= 1000 && i < 4) b /= 1000, ++i;
  return fmt::format("{:.1f} {}", b, u[i]);
}

// Whether generate writes op's bias-after term (torch_scales.cpp): an op with a bias input whose
// reference was computed in float32 (a bfloat16/float16 case on the CPU; its metadata says so).
bool bias_after_expected(const cases::Case& c, cases::Op op, const Json& meta) {
  const auto ts = c.tensors(op);
  const bool bias = std::any_of(ts.begin(), ts.end(), [](const cases::TensorInfo& t) {
    return t.name == "bias" && t.role == cases::Role::input;
  });
  const Json* cd = find_path(meta, {"compute", cases::op_name(op), "compute_dtype"});
  return bias && cd && cd->is_string() && cd->get<std::string>() == "float32";
}

// --resume: a case is kept when its metadata exists (written only after all its tensors) and
// every tensor it lists is on disk with the value hash the metadata records.
bool adopt_finished_case(const cases::Case& c, const std::string& root, const std::string& dir, SetWriter& writer) {
  const std::string meta_rel = dir + "/" + c.name + "_metadata.json";
  auto meta = read_json(root + "/" + meta_rel);
  if (!meta) return false;
  auto back = cases::case_from_metadata(*meta, meta_rel);
  if (!back || back->dtype != c.dtype) return false;
  // Inputs drawn from other distributions (or another .npy file) are not this case's.
  if (cases::input_dists_json(back->input_dists) != cases::input_dists_json(c.input_dists)) return false;
  struct Kept {
    std::string rel;
    cases::ManifestEntry entry;
    cases::TensorRecord record;
  };
  std::vector<Kept> kept;
  for (const cases::OpInstance& inst : c.ops) {
    const cases::Op op = inst.op();
    for (const auto& t : c.tensors(op)) {
      const std::string rel = dir + "/" + c.file_name(op, t.name);
      std::string want = cases::metadata_hash(*meta, op, t.name);
      auto tensor = npy::read(root + "/" + rel);
      if (want.empty() || !tensor || tensor->shape() != t.shape || tensor_sha256(*tensor) != want) return false;
      auto fh = sha256_file(root + "/" + rel);
      if (!fh) return false;
      std::optional<double> max_abs;  // kept as the metadata has it (the metadata file is kept too)
      const Json& tj = (*meta)["ops"][cases::op_name(op)]["tensors"][t.name];
      if (tj.contains("max_abs") && tj["max_abs"].is_number()) max_abs = tj["max_abs"].get<double>();
      kept.push_back({rel, {std::filesystem::file_size(root + "/" + rel), *fh}, {want, tensor->dtype(), max_abs, std::nullopt}});
    }
    // The case's error-bound scales (a case without them was made by an older generate: redo it).
    // A scale's sha256 is its data section's (float32 scales: the same as their values').
    auto keep_scale = [&](const std::string& rel, const Json& sj, const Shape& shape) {
      if (!sj.is_object() || !sj.contains("sha256") || !sj["sha256"].is_string()) return false;
      auto tensor = npy::read(root + "/" + rel);
      if (!tensor || tensor->shape() != shape || !cases::scale_unit(sj, tensor->dtype(), rel) ||
          sha256_hex(tensor->bytes(), tensor->nbytes()) != sj["sha256"].get<std::string>())
        return false;
      auto fh = sha256_file(root + "/" + rel);
      if (!fh) return false;
      std::optional<int> unit;
      if (sj.contains("unit_log2")) unit = sj["unit_log2"].get<int>();
      kept.push_back({rel, {std::filesystem::file_size(root + "/" + rel), *fh},
                      {sj["sha256"].get<std::string>(), tensor->dtype(), std::nullopt, unit}});
      return true;
    };
    for (const auto& t : c.tensors(op)) {
      if (!c.has_bound_scale(t)) continue;
      const Json& sj = (*meta)["ops"][cases::op_name(op)]["scales"][t.name];
      if (!keep_scale(dir + "/" + c.file_name(op, t.name + "_scale"), sj, t.shape)) return false;
      // A user's tensor: scales widened by the measured partial sums (a case made before: redo it).
      const bool user = c.has_user_tensor(op);
      if (cases::has_partial_sums(c, op, t) &&
          !(sj.contains("partial_sums") && sj["partial_sums"] == cases::partial_sums_mark()))
        return false;
      // A bfloat16/float16 gradient's dL/dy choice term, or an output's bias-after term: kept when
      // listed; a case that should have it and does not (made before it) is redone. Every such
      // gradient has one; an output, where it has a bias and its reference was computed in float32.
      if ((t.role == cases::Role::grad || t.role == cases::Role::output) && c.dtype != DType::float32 && !user) {
        const bool wanted = t.role == cases::Role::grad || bias_after_expected(c, op, *meta);
        if (sj.contains("choice") ? !keep_scale(dir + "/" + c.file_name(op, t.name + "_choice"), sj["choice"], t.shape)
                                  : wanted)
          return false;
      }
    }
  }
  auto mh = sha256_file(root + "/" + meta_rel);
  if (!mh) return false;
  for (auto& k : kept) writer.adopt(k.rel, k.entry, &k.record);
  writer.adopt(meta_rel, {std::filesystem::file_size(root + "/" + meta_rel), *mh}, nullptr);
  return true;
}

// Temporary files of a killed run are never part of a set. (A walk that never follows a link: a
// symlink loop in the directory used to abort --resume with exit 134.)
void remove_stale_temporaries(const std::string& root) {
  auto walk = fs::walk_tree(root);
  if (!walk) return;
  for (const auto& e : walk->entries)
    if (e.type == fs::EntryType::regular && e.rel.find(".tmp.") != std::string::npos)
      (void)fs::remove_tree(root + "/" + e.rel);
}

// --resume continues only a directory made with the same options: it kept the old seed's cases
// while config.json claimed the new seed. config.json is written first, so an
// interrupted run has it; the first key that differs is named.
Status check_resumable(const std::string& out, const Json& config_now, int threads, bool was_empty) {
  if (was_empty) return Status::ok();
  // The thread count is not an option of the set but changes its numbers: OpenBLAS splits a sum
  // differently on another number of threads, so cases resumed on 2 beside cases made on 1 are
  // not one set (system_info.json, written when generate starts, records it).
  if (auto sys = read_json(out + "/system_info.json"); sys && sys->is_object())
    if (auto t = sys->find("threads"); t != sys->end() && t->is_number_integer() && t->get<std::int64_t>() != threads)
      return Error{fmt::format("--resume: {} was generated on {} thread(s), this run would use {}: OpenBLAS "
                               "results depend on the thread count, so the resumed cases would not match the "
                               "others; resume with --threads {}, or regenerate with --overwrite",
                               out, json_text(*t), threads, json_text(*t))};
  const std::string path = out + "/config.json";
  if (!fs::exists(path))
    return Error{"--resume: " + out + " has no config.json, so the options that made it are unknown; "
                 "regenerate it with --overwrite"};
  auto old = read_json(path);
  if (!old) return Error{"--resume: " + old.message()};
  if (!old->is_object()) return Error{"--resume: " + path + " is not a JSON object"};
  // The options a user sets first, so the message names --seed rather than the case list.
  std::vector<std::string> keys{"seed", "fill", "dtypes", "selection"};
  // Compared as written: config.json holds the options through json_text (a byte that is not
  // UTF-8 as \xNN), so the new options go through it too before they are compared.
  const Json config = Json::parse(json_text(config_now));
  for (const auto& [key, value] : config.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  for (const auto& key : keys) {
    const Json& value = config[key];
    auto it = old->find(key);
    if (it == old->end() || *it != value)
      return Error{fmt::format("--resume: {} was made with {} {}, this run asks for {}; resume with the same "
                               "options, or regenerate with --overwrite",
                               out, key, it == old->end() ? "(none)" : json_text(*it), json_text(value))};
  }
  for (const auto& [key, value] : old->items())
    if (!config.contains(key))
      return Error{fmt::format("--resume: {} has {} {}, which this run does not set; regenerate with --overwrite",
                               path, key, json_text(value))};
  return Status::ok();
}

// The memory this process may still take, in bytes, and what bounds it: the least of the kernel's
// MemAvailable, the cgroup's memory.max less what the cgroup uses, and RLIMIT_AS / RLIMIT_DATA.
struct Available {
  double bytes = INFINITY;
  std::string what = "no limit found";
};
Available available_memory() {
  Available a;
  auto take = [&](double b, const std::string& what) {
    if (b >= 0 && b < a.bytes) a = {b, what};
  };
  std::ifstream mi("/proc/meminfo");
  for (std::string line; std::getline(mi, line);)
    if (line.rfind("MemAvailable:", 0) == 0) take(std::stod(line.substr(13)) * 1024, "MemAvailable in /proc/meminfo");
  auto read_num = [](const char* path) -> double {
    std::ifstream in(path);
    std::string v;
    if (!(in >> v) || v == "max") return -1;
    try {
      return std::stod(v);
    } catch (...) {
      return -1;
    }
  };
  const double max = read_num("/sys/fs/cgroup/memory.max"), cur = read_num("/sys/fs/cgroup/memory.current");
  if (max >= 0) take(std::max(0.0, max - std::max(0.0, cur)), "the cgroup's memory.max less memory.current");
  for (auto [res, name] : {std::pair{RLIMIT_AS, "RLIMIT_AS (ulimit -v)"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)"}}) {
    struct rlimit r;
    if (::getrlimit(res, &r) == 0 && r.rlim_cur != RLIM_INFINITY) take(static_cast<double>(r.rlim_cur), name);
  }
  return a;
}

std::string gib(double b) { return fmt::format("{:.1f} GiB", b / (1u << 30)); }

// Refuses, before anything is allocated, a case whose op cannot fit: its tensors alone (inputs,
// output, gradients, all float32 and alive together when its results are taken) must fit in what
// the machine has; a case of 16 GiB weights otherwise ended in std::bad_alloc. A lower bound of
// the need (LibTorch's scratch and the scale pass's squared copies come on top), so no case that
// fits is refused.
Status check_memory(const std::vector<cases::Case>& list, const std::string& cases_path) {
  const Available have = available_memory();
  for (const auto& c : list)
    for (const cases::OpInstance& inst : c.ops) {
      double need = 0, largest = 0;
      std::string big;
      for (const auto& t : c.tensors(inst.op())) {
        const double b = static_cast<double>(shape_numel(t.shape)) * 4;
        need += b;
        if (b > largest) largest = b, big = fmt::format("{} {}: {}", t.name, shape_to_string(t.shape), gib(b));
      }
      if (need > have.bytes)
        return Error{fmt::format("{}: case {}/{} ({}) needs at least {} for its tensors alone (the largest, {}), "
                                 "and this machine has {} ({}): refused before allocating anything",
                                 cases_path, dtype_name(c.dtype), c.name, cases::op_name(inst.op()), gib(need), big,
                                 gib(have.bytes), have.what)};
    }
  return Status::ok();
}

// config.json: the case file as read, with what this generate added (seed, fill, selection, the
// dtypes present and every case expanded).
Json set_config(const cases::CaseFile& file, const std::vector<cases::Case>& list, const GenerateOptions& opt,
                std::uint64_t seed) {
  Json config = file.source;
  config["seed"] = seed;
  config["fill"] = opt.fill == Fill::exact ? "exact" : "random";
  config["selection"] = {{"only", opt.only}, {"shard", fmt::format("{}/{}", opt.shard.index, opt.shard.count)}};
  if (opt.shard.count > 1) {
    // The dtypes asked for, before sharding: a shard holds only some of the sweep's cases, so its
    // "dtypes" cannot show that another shard was made with another --dtype (merge compares this).
    Json asked = Json::array();
    for (DType d : opt.dtypes.empty() ? file.dtypes : opt.dtypes) asked.push_back(std::string(dtype_name(d)));
    config["selection"]["dtypes"] = asked;
  }
  Json dts = Json::array();
  for (auto& c : list) {
    auto n = std::string(dtype_name(c.dtype));
    if (std::find(dts.begin(), dts.end(), n) == dts.end()) dts.push_back(n);
  }
  config["dtypes"] = dts;
  Json expanded = Json::array();
  for (auto& c : list) {
    // The case's first op as case files spell it, every further op (a conv's im2col matmul) by name.
    Json item = {{"dtype", dtype_name(c.dtype)}, {"name", c.name}};
    for (std::size_t i = 0; i < c.ops.size(); ++i) {
      const ops::OpDef& def = ops::find(c.ops[i].op());
      if (i == 0) item.update(def.expanded_case(c.ops[i].params));
      else item[def.name()] = def.metadata_params(c.ops[i].params);
    }
    if (c.train) item["train"] = train::to_json(*c.train);
    if (!c.input_dists.empty()) item["inputs"] = cases::input_dists_json(c.input_dists);
    expanded.push_back(std::move(item));
  }
  config["expanded_cases"] = expanded;
  return config;
}

// Memory budget: the largest op's working set — its inputs and results, about two of the sweep's
// largest tensors (the im2col A and grad_A), plus the scratch LibTorch's CPU kernels materialize (a
// convolution's columns: OpDef::scratch_elements). Before an op computes, the writer drains until
// what it still holds plus that op's own working set fits the budget, so the queue of earlier
// cases overlaps the small cases' compute but never stacks on the largest's (it did: 1.35 GB peak
// on the last three cases of the default sweep, against ~0.62 GB of tensors in the largest op).
std::size_t working_set(const cases::Case& c, cases::Op op) {
  std::size_t n = static_cast<std::size_t>(ops::find(op).scratch_elements(c.find(op)->params)) * 4;
  for (const auto& t : c.tensors(op)) n += static_cast<std::size_t>(shape_numel(t.shape)) * 4;
  return n;
}

std::size_t writer_budget(const std::vector<cases::Case>& list) {
  std::size_t budget = 0;
  for (const auto& c : list)
    for (const cases::OpInstance& inst : c.ops) budget = std::max(budget, working_set(c, inst.op()));
  return std::clamp<std::size_t>(budget, std::size_t(64) << 20, std::size_t(2) << 30);
}

// What every case of one generate shares.
struct Generation {
  const GenerateOptions& opt;
  std::uint64_t seed;
  const TorchDevice& dev;
  std::ostream& log;
};

// One op of a case: its inputs and reference results (and, for a training case, the trajectory),
// queued on the writer with the scales stored as float16. False (logged) when LibTorch failed.
bool generate_op(const Generation& g, const cases::Case& c, cases::Op op, const std::string& dir, Json& case_info,
                 SetWriter& writer, GenerateSummary& sum) {
  const std::size_t need = working_set(c, op);
  auto tq = Clock::now();
  writer.wait_below(writer.max_queued_bytes() > need ? writer.max_queued_bytes() - need : 0);
#ifdef __GLIBC__
  // Hand what the writer freed back to the system before allocating the op's tensors: glibc
  // keeps freed blocks below its (self-raising, up to 32 MB) mmap threshold in the heap, and
  // the sweep's peak RSS crept from 0.92 GB over its two largest cases to 1.14 GB over all 15.
  ::malloc_trim(0);
#endif
  sum.wait_seconds += since(tq);
  auto ti = Clock::now();
  auto inputs = make_inputs(c, op, g.seed, g.opt.fill, g.dev.threads);
  sum.input_seconds += since(ti);
  std::map<std::string, const Tensor*> view;
  for (auto& [k, v] : inputs) view[k] = &v;
  auto tcomp = Clock::now();
  Json info;
  auto outs = torch_compute(c, op, view, g.dev, &info, nullptr, /*scales=*/true);
  sum.compute_seconds += since(tcomp);
  auto failed = [&](const std::string& why) {
    g.log << fmt::format("validate: {}/{} {} FAILED: {}\n", dir, c.name, cases::op_name(op), why);
    return false;
  };
  if (!outs) return failed(outs.message());
  if (!info.empty()) case_info[cases::op_name(op)] = info;
  if (c.train) {
    // The trajectory (docs/training.md): later batches drawn exactly as `run` will draw them.
    auto ttr = Clock::now();
    auto traj = torch_trajectory(c, op, view, [&](std::int64_t s) {
      return make_inputs(c, op, g.seed, g.opt.fill, g.dev.threads, s);
    }, g.dev, nullptr, /*scales=*/true);
    sum.compute_seconds += since(ttr);
    if (!traj) return failed(traj.message());
    outs->merge(*traj);
  }
  auto tw = Clock::now();
  for (auto& [k, v] : inputs) writer.write_tensor(dir + "/" + c.file_name(op, k), std::move(v));
  for (auto& [k, v] : *outs) {
    const std::string rel = dir + "/" + c.file_name(op, k);
    if (!cases::is_scale_name(k)) {
      writer.write_tensor(rel, std::move(v));
      continue;
    }
    // Stored as float16 rounded up (scale_file.hpp): half the bytes to write and hash.
    cases::StoredScale stored = cases::store_scale(v);
    v = Tensor();
    writer.write_tensor(rel, std::move(stored.values), stored.unit_log2);
  }
  sum.wait_seconds += since(tw);  // time blocked on the writer's byte budget
  return true;
}

// A case's metadata needs the hashes of its tensors: it is written on the writer thread after them.
void queue_metadata(SetWriter& writer, const cases::Case& c, const std::string& dir, std::shared_ptr<Json> case_info) {
  writer.then([c, dir, case_info](SetWriter& w) -> Status {
    std::map<std::string, cases::TensorRecord> mine;
    for (auto& [rel, rec] : w.records())
      if (rel.rfind(dir + "/" + c.name + "_", 0) == 0) mine[rel.substr(dir.size() + 1)] = rec;
    Json meta = cases::case_metadata(c, mine);
    if (!case_info->empty()) meta["compute"] = *case_info;
    return w.write_text_now(dir + "/" + c.name + "_metadata.json", json_text(meta, 2) + "\n");
  });
}

// The closing files (system_info.json again, README.md), everything written, then the manifest.
Status finish_set(const Generation& g, const std::vector<cases::Case>& list, const std::vector<std::string>& failed,
                  SetWriter& writer, GenerateSummary& sum) {
  writer.write_text("system_info.json", json_text(system_info(g.dev), 2) + "\n");
  writer.write_text("README.md", cases::set_readme(list, "`" + g.opt.cases_path + "`", g.seed,
                                                   g.opt.fill == Fill::exact ? "exact" : "random"));
  auto tw = Clock::now();
  Status st = writer.drain();
  sum.wait_seconds += since(tw);
  if (!st) return st;
  sum.bytes = writer.bytes_written();
  Json extra = Json::object();
  if (!failed.empty()) extra["failed_cases"] = failed;
  extra["cases"] = sum.cases_ok;
  return cases::write_manifest(g.opt.out, cases::kReferenceFormat, writer.files(), extra);
}

// Every case of the list, in order, into the claimed output directory.
Status generate_cases(const Generation& g, const std::vector<cases::Case>& list, const Json& config,
                      Clock::time_point t0, GenerateSummary& sum) {
  const GenerateOptions& opt = g.opt;
  const bool tty = ::isatty(STDERR_FILENO);
  const bool live = opt.progress < 0 ? tty : false;
  const bool plain = opt.progress == 1 || (opt.progress < 0 && !tty);
  std::vector<std::string> failed;
  SetWriter writer(opt.out, writer_budget(list), 2, opt.direct_io);
  VALIDATE_TRY(writer.write_text_now("config.json", json_text(config, 2) + "\n"));
  // Now as well as at the end: an interrupted set keeps the thread count its cases were made
  // with, which --resume must match.
  VALIDATE_TRY(writer.write_text_now("system_info.json", json_text(system_info(g.dev), 2) + "\n"));
  std::size_t i = 0;
  for (const auto& c : list) {
    ++i;
    const std::string dir = std::string(dtype_name(c.dtype));
    auto tc = Clock::now();
    if (opt.resume && adopt_finished_case(c, opt.out, dir, writer)) {
      ++sum.cases_ok;
      ++sum.cases_resumed;
      if (plain) g.log << fmt::format("[{}/{}] {}/{} kept (finished by an earlier run)\n", i, list.size(), dir, c.name);
      continue;
    }
    auto case_info = std::make_shared<Json>(Json::object());
    bool ok = true;
    for (const cases::OpInstance& inst : c.ops)
      if (!(ok = generate_op(g, c, inst.op(), dir, *case_info, writer, sum))) break;
    if (!ok) {
      failed.push_back(dir + "/" + c.name);
      ++sum.cases_failed;
      continue;
    }
    ++sum.cases_ok;
    queue_metadata(writer, c, dir, case_info);
    double el = since(t0);
    double eta = el / static_cast<double>(i) * static_cast<double>(list.size() - i);
    std::string line = fmt::format("[{}/{}] {}/{} K={} ({:.1f}s) written {} elapsed {:.0f}s eta {:.0f}s", i,
                                   list.size(), dir, c.name, ops::find(c.ops.front().op()).reduction_length(c.ops.front().params), since(tc),
                                   human_bytes(static_cast<double>(writer.bytes_written())), el, eta);
    if (live) std::cerr << "\r\033[K" << line << std::flush;
    else if (plain) g.log << line << "\n";
  }
  if (live) std::cerr << "\n";
  return finish_set(g, list, failed, writer, sum);
}

}  // namespace

Result<GenerateSummary> generate(const GenerateOptions& opt, std::ostream& log) {
  auto t0 = Clock::now();
  auto file = cases::load_case_file(opt.cases_path);
  if (!file) return file.status();
  cases::Selection sel{opt.dtypes, opt.only, opt.shard};
  auto list = cases::expand(*file, sel);
  if (!list) return list.status();
  if (list->empty()) return Error{"no case of " + opt.cases_path + " matches the selection (--dtype/--only/--shard)"};
  VALIDATE_TRY(check_memory(*list, opt.cases_path));
  VALIDATE_TRY(check_inputs(*list, opt.fill, opt.cases_path));
  const std::uint64_t seed = opt.seed.value_or(file->seed);

  auto dev = open_torch_device(opt.device, opt.allow_tf32, opt.threads);
  if (!dev) return dev.status();
  if (!dev->fallback_reason.empty())
    std::cerr << "validate: WARNING: --device " << opt.device << " requested but " << dev->fallback_reason
              << "; generating on CPU. This is recorded in system_info.json as device_fallback.\n";
  const Json config = set_config(*file, *list, opt, seed);

  // The set holds exactly this generate: an existing non-empty --out is refused (it kept an older
  // seed's cases, which verify, list, run and compare then used) unless --overwrite empties it or
  // --resume continues a run with the same options; one writer at a time.
  auto out_dir = fs::claim_output_dir(opt.out, {"--out", {}, opt.overwrite, opt.resume});
  if (!out_dir) return out_dir.status();
  if (opt.resume) {
    VALIDATE_TRY(check_resumable(opt.out, config, dev->threads, out_dir->was_empty()));
    // A stale manifest would make a half-rewritten set look complete: remove it first.
    std::filesystem::remove(std::filesystem::path(opt.out) / "manifest.json");
    remove_stale_temporaries(opt.out);
  }

  GenerateSummary sum;
  sum.device_used = dev->used;
  VALIDATE_TRY(generate_cases(Generation{opt, seed, *dev, log}, *list, config, t0, sum));
  sum.seconds = since(t0);
  return sum;
}

}  // namespace validate::generate
