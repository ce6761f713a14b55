// The exec runner: DESIGN.md "External programs". Writes a task's inputs in the layouts of the
// layout file, runs the user's command, reads the results back and converts them to canonical.
#include "validate/runners/exec_runner.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "exec_process.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/tree.hpp"
#include "validate/layout/convert.hpp"
#include "validate/ops/registry.hpp"
#include "validate/runners/interrupt.hpp"

extern char** environ;

namespace validate::runners {

namespace {

namespace stdfs = std::filesystem;

constexpr const char* kProtocol = "validate-exec/1";
constexpr std::size_t kTailBytes = 4096;      // of stderr kept for the message
constexpr std::size_t kMaxOutsideListed = 8;  // files written outside the work dir named in full

// Every variable of the protocol. They are dropped from the inherited environment before the
// task's own are added, so a conv2d task never sees a VALIDATE_M left over from an enclosing run.
const std::vector<std::string>& protocol_vars() {
  static const std::vector<std::string> v{
      "VALIDATE_OP",   "VALIDATE_CASE", "VALIDATE_DTYPE", "VALIDATE_DIR",    "VALIDATE_FORMAT",
      "VALIDATE_N",    "VALIDATE_C",    "VALIDATE_H",     "VALIDATE_W",      "VALIDATE_O",
      "VALIDATE_KH",   "VALIDATE_KW",   "VALIDATE_SH",    "VALIDATE_SW",     "VALIDATE_PH",
      "VALIDATE_PW",   "VALIDATE_DH",   "VALIDATE_DW",    "VALIDATE_GROUPS", "VALIDATE_HOUT",
      "VALIDATE_WOUT", "VALIDATE_BIAS", "VALIDATE_M",     "VALIDATE_K",      "VALIDATE_NCOLS"};
  return v;
}

// Absolute, lexically normal, no trailing '/': the spelling snapshot_tree's paths and skips use.
std::string normal_dir(const std::string& p) {
  std::error_code ec;
  std::string s = stdfs::absolute(p, ec).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool within(const std::string& p, const std::string& root) {
  return p == root ||
         (p.size() > root.size() && p.compare(0, root.size(), root) == 0 && p[root.size()] == '/');
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Which gradients the layout file names, per op. LayoutSet gives every tensor of an op the file
// names a spec (the file's, else its base preset's), so it cannot tell a gradient the program
// writes from one the base filled in; the file can. nullopt: a preset or an in-memory set, which
// declares every tensor it holds.
using Declared = std::map<std::string, std::set<std::string>, std::less<>>;
std::optional<Declared> declared_in_file(const layout::LayoutSet& set) {
  for (const auto& p : layout::preset_names())
    if (set.name == p) return std::nullopt;
  std::error_code ec;
  if (set.name.empty() || !stdfs::is_regular_file(set.name, ec)) return std::nullopt;
  auto doc = read_json(set.name);
  if (!doc || !doc->is_object()) return std::nullopt;
  Declared d;
  for (const auto& [op, tensors] : doc->items()) {
    if (!tensors.is_object() || !set.has_op(op)) continue;
    auto& names = d[op];
    for (const auto& [t, spec] : tensors.items()) names.insert(t);
  }
  return d;
}

struct Expected {
  cases::TensorInfo info;
  layout::Spec spec;
  DType dtype;
  std::string file;
};

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

class ExecRunner final : public Runner {
 public:
  ExecRunner(ExecOptions opt, layout::LayoutSet layouts)
      : opt_(std::move(opt)), layouts_(std::move(layouts)), declared_(declared_in_file(layouts_)) {
    for (const auto& g : opt_.guard_dirs)
      if (!g.empty()) guard_.push_back(normal_dir(g));
  }

  std::string name() const override { return "exec"; }

  nlohmann::json info() const override {
    return {{"backend", "exec"},           {"device", "external program"},
            {"protocol", kProtocol},       {"cmd", opt_.cmd},
            {"timeout_s", opt_.timeout_s}, {"keep_work", opt_.keep_work},
            {"shell", "/bin/sh -c"},       {"layout", layout::to_json(layouts_)},
            {"guard_dirs", guard_}};
  }

  Status prepare() override {
    if (opt_.cmd.empty()) return Error{"--backend exec needs --cmd 'PROGRAM {dir}'"};
    // Past a week the deadline arithmetic overflowed (1e10 s killed every program at once).
    if (!(opt_.timeout_s > 0) || !(opt_.timeout_s <= kMaxTimeoutSeconds))
      return Error{fmt::format("--timeout {} must be a number of seconds > 0 and <= {:g} (one week)",
                               opt_.timeout_s, kMaxTimeoutSeconds)};
    VALIDATE_TRY(check_placeholders_unquoted(opt_.cmd));
    if (::access("/bin/sh", X_OK) != 0)
      return Error{"--backend exec runs --cmd with /bin/sh, which is not executable here"};
    return Status::ok();
  }

  std::vector<OpResult> run(const OpTask& task) override {
    std::vector<OpResult> out(1);
    run_one(task, out[0]);
    return out;
  }

 private:
  bool wants(const std::string& op, const cases::TensorInfo& t) const {
    if (t.role != cases::Role::grad || !declared_) return true;
    auto it = declared_->find(op);
    return it != declared_->end() && it->second.count(t.name) > 0;
  }

  // Issue 12: the results the layout file does not ask for (a forward-only program leaves the
  // gradients out). Recorded in the op's info so compare says "not requested", not "not run".
  Json not_requested(const std::string& op, const std::vector<cases::TensorInfo>& tensors) const {
    Json out = Json::array();
    for (const auto& t : tensors)
      if (t.role != cases::Role::input && !wants(op, t)) out.push_back(t.name);
    return out;
  }

  void run_one(const OpTask& task, OpResult& r) const;

  // The trees a task's program must leave alone: the run directory (when `dir` is the driver's
  // RUN/work/<dtype>/<case>/<op>) and the guard dirs; a tree inside another is covered by it, one
  // inside the work dir belongs to the program.
  std::vector<std::string> guarded_roots(const std::string& dir) const {
    std::vector<std::string> c = guard_;
    const stdfs::path work = stdfs::path(dir).parent_path().parent_path().parent_path();
    if (work.filename() == "work" && work.has_parent_path())
      c.push_back(work.parent_path().string());
    std::sort(c.begin(), c.end());
    std::vector<std::string> roots;
    for (const auto& x : c) {
      if (within(x, dir)) continue;
      bool covered = false;
      for (const auto& r : roots) covered = covered || within(x, r);
      if (!covered) roots.push_back(x);
    }
    return roots;
  }

  ExecOptions opt_;
  std::vector<std::string> guard_;  // opt_.guard_dirs, normalised
  layout::LayoutSet layouts_;
  std::optional<Declared> declared_;
};

void ExecRunner::run_one(const OpTask& task, OpResult& r) const {
  const cases::Case& c = *task.c;
  const std::string op = cases::op_name(task.op);
  auto fail = [&](const std::string& m) {
    r.outcome = RunOutcome::error;
    r.message = m;
  };
  if (!layouts_.has_op(op)) {
    r.outcome = RunOutcome::skipped;
    r.message = "op not in the layout file";
    return;
  }
  if (task.work_dir.empty()) return fail("exec: no work directory for this task");
  std::error_code ec;
  const std::string dir = normal_dir(task.work_dir);
  const std::string tmp = dir + "/tmp";
  if (Status st = fs::make_dirs(dir); !st) return fail(st.message());
  struct stat dir_before {};
  if (::lstat(dir.c_str(), &dir_before) != 0 || !S_ISDIR(dir_before.st_mode))
    return fail("exec: work directory " + dir + " is not a directory");

  const bool npy_format = layouts_.format == "npy";
  const std::string ext = npy_format ? ".npy" : ".bin";
  const DType storage = storage_dtype(c.dtype);
  const layout::TensorSpecs& specs = layouts_.ops.find(op)->second;

  // Files an earlier run left here must never be read as this run's results.
  for (const auto& t : c.tensors(task.op))
    for (const char* x : {".bin", ".npy"}) stdfs::remove(dir + "/" + t.name + x, ec);
  for (const char* f : {"case.json", "stdout.log", "stderr.log"}) stdfs::remove(dir + "/" + f, ec);
  if (Status st = fs::remove_tree(tmp); !st) return fail(st.message());
  if (Status st = fs::make_dirs(tmp); !st) return fail(st.message());

  std::vector<Expected> inputs, results;
  for (const auto& t : c.tensors(task.op)) {
    auto it = specs.find(t.name);
    Expected e{t, it != specs.end() ? it->second : layout::canonical_spec(t.canonical_axes),
               t.role == cases::Role::loss ? DType::float32 : storage, t.name + ext};
    if (t.role == cases::Role::input)
      inputs.push_back(std::move(e));
    else if (wants(op, t))
      results.push_back(std::move(e));
  }

  // case.json: everything a program with a JSON parser needs.
  const cases::OpInstance* inst = c.find(task.op);
  assert(inst && "run_driver hands out only the case's own ops");
  const Json params = ops::find(task.op).exec_params(inst->params);
  Json tensors = Json::object();
  Json layouts_used = Json::object();
  for (const auto* group : {&inputs, &results})
    for (const auto& e : *group) {
      tensors[e.info.name] = {
          {"file", e.file},
          {"layout", layout::to_string(e.spec)},
          {"shape", layout::shape_in_layout(e.spec, e.info.canonical_axes, e.info.shape)},
          {"role", cases::role_name(e.info.role)},
          {"dtype", dtype_name(e.dtype)}};
      layouts_used[e.info.name] = layout::to_string(e.spec);
    }
  const Json doc = {{"protocol", kProtocol},
                    {"op", op},
                    {"case", c.name},
                    {"dtype", dtype_name(c.dtype)},
                    {"storage_dtype", dtype_name(storage)},
                    {"params", params},
                    {"format", layouts_.format},
                    {"tensors", tensors}};
  if (Status st = write_json(dir + "/case.json", doc); !st) return fail(st.message());

  // The inputs, in their layouts.
  for (const auto& e : inputs) {
    auto it = task.inputs.find(e.info.name);
    if (it == task.inputs.end() || !it->second)
      return fail("exec: input '" + e.info.name + "' was not given");
    const Tensor& x = *it->second;
    if (x.shape() != e.info.shape || x.dtype() != e.dtype)
      return fail(fmt::format("exec: input '{}' is {} {}, expected {} {}", e.info.name,
                              dtype_name(x.dtype()), shape_to_string(x.shape()),
                              dtype_name(e.dtype), shape_to_string(e.info.shape)));
    const Tensor laid = layout::to_layout(x, e.info.canonical_axes, e.spec);
    const std::string header =
        npy_format ? npy::make_header(e.dtype, laid.shape(), e.spec.fortran) : std::string();
    if (Status st = fs::write_atomic(dir + "/" + e.file, laid.bytes(), laid.nbytes(), header); !st)
      return fail(st.message());
  }

  // The environment: the harness's own, less stale protocol variables, plus this task's.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool ours = key == "TMPDIR" || key == "TMP" || key == "TEMP";
    for (const auto& v : protocol_vars()) ours = ours || key == v;
    if (!ours) env.push_back(kv);
  }
  auto set = [&](const char* k, const auto& v) { env.push_back(fmt::format("{}={}", k, v)); };
  set("VALIDATE_OP", op);
  set("VALIDATE_CASE", c.name);
  set("VALIDATE_DTYPE", dtype_name(c.dtype));
  set("VALIDATE_DIR", dir);
  set("VALIDATE_FORMAT", layouts_.format);
  // Its temporary files belong in its work directory, not in a /tmp shared with everything else.
  for (const char* k : {"TMPDIR", "TMP", "TEMP"}) set(k, tmp);
  // The op's own (harness/ops/<op>/<op>.cpp, exec_env); docs/runners.md lists them.
  const auto sizes = ops::find(task.op).exec_env(c.find(task.op)->params);
  for (const auto& [k, v] : sizes) set(k, v);

  const std::string cmd =
      expand_command(opt_.cmd, dir, c.name, op, std::string(dtype_name(c.dtype)));
  // Snapshots of the guarded trees around the program: anything it changed there is named.
  const std::vector<std::string> roots = guarded_roots(dir);
  std::vector<exec::TreeSnapshot> before;
  for (const auto& root : roots) before.push_back(exec::snapshot_tree(root, {dir}));
  const auto pr =
      exec::run_shell(cmd, env, dir + "/stdout.log", dir + "/stderr.log", opt_.timeout_s);
  std::vector<std::string> changed;
  for (std::size_t i = 0; i < roots.size(); ++i)
    for (auto& change : exec::tree_changes(before[i], exec::snapshot_tree(roots[i], {dir})))
      changed.push_back(std::move(change));
  std::string outside;
  if (!changed.empty()) {
    outside = "the program wrote outside its work directory: ";
    for (std::size_t i = 0; i < changed.size() && i < kMaxOutsideListed; ++i)
      outside += (i ? ", " : "") + changed[i];
    if (changed.size() > kMaxOutsideListed)
      outside += fmt::format(" and {} more", changed.size() - kMaxOutsideListed);
  }
  const std::string tail = exec::file_tail(dir + "/stderr.log", kTailBytes);
  r.info = {{"command", cmd},          {"work_dir", dir},         {"format", layouts_.format},
            {"layouts", layouts_used}, {"program_s", pr.seconds}, {"exit_status", pr.exit_code}};
  r.info["not_requested"] = not_requested(op, c.tensors(task.op));
  if (!changed.empty()) r.info["written_outside"] = changed;
  if (!tail.empty()) r.info["stderr_tail"] = tail;
  auto with_stderr = [&](const std::string& what) {
    // A write outside the work directory comes first: it is the one that may have damaged
    // something else (the reference set, another case's results).
    std::string m = (outside.empty() ? what : outside + "; " + what) + " (work dir " + dir + ")";
    if (!tail.empty()) return m + "; stderr: " + tail;
    const std::string out_tail = exec::file_tail(dir + "/stdout.log", kTailBytes);
    return m + (out_tail.empty() ? "; nothing on stderr or stdout"
                                 : "; nothing on stderr; stdout: " + out_tail);
  };

  if (!pr.spawn_error.empty()) return fail(pr.spawn_error);
  if (pr.interrupted)
    return fail(with_stderr(fmt::format(
        "interrupted: validate received {} and forwarded it to the program's process group{}",
        exec::signal_description(pr.interrupted),
        pr.exit_code >= 0 || pr.signal ? "" : fmt::format(", which was killed after {:g} s", kInterruptGraceSeconds))));
  {
    // A program that replaced its work directory (by a symlink to elsewhere, say) would have the
    // harness read and delete through it.
    struct stat now {};
    if (::lstat(dir.c_str(), &now) != 0 || !S_ISDIR(now.st_mode) || now.st_ino != dir_before.st_ino ||
        now.st_dev != dir_before.st_dev)
      return fail(with_stderr("the program removed or replaced its work directory " + dir));
    ::chmod(dir.c_str(), 0755);  // one it made unreadable (mode 000) is ours to read back
  }
  if (pr.timed_out)
    return fail(with_stderr(
        fmt::format("timed out after {:g} s: the program's process group was killed (--timeout)",
                    opt_.timeout_s)));
  if (pr.signal)
    return fail(with_stderr("the program was killed by " + exec::signal_description(pr.signal)));
  if (pr.exit_code != 0) {
    // The shell reports a command that a signal ended as status 128 + N (139: a segfault).
    // 126/127: the shell found the command but could not run it / did not find it.
    std::string how;
    if (pr.exit_code > 128 && pr.exit_code < 128 + 65)
      how = " (128 + " + std::to_string(pr.exit_code - 128) + ": a command it ran was killed by " +
            exec::signal_description(pr.exit_code - 128) + ")";
    else if (pr.exit_code == 127)
      how = " (127: the shell did not find the command)";
    else if (pr.exit_code == 126)
      how = " (126: the command is not executable)";
    return fail(with_stderr(fmt::format("the program exited with status {}{}", pr.exit_code, how)));
  }

  std::string problems;
  for (const auto& e : results) {
    auto t = read_result(dir, e, npy_format);
    if (!t) {
      problems += (problems.empty() ? "" : "; ") + t.message();
      continue;
    }
    r.outputs.emplace(e.info.name, std::move(*t));
  }
  if (!problems.empty() || !outside.empty()) {
    r.outputs.clear();
    return fail(with_stderr(problems.empty() ? "its results are not used" : problems));
  }
  if (!opt_.keep_work) {
    for (const auto* group : {&inputs, &results})
      for (const auto& e : *group) stdfs::remove(dir + "/" + e.file, ec);
    (void)fs::remove_tree(tmp);  // a leftover scratch file is not a failure of the case
  }
}

// The placeholders of --cmd, in the order expand_command() takes their values.
constexpr const char* kPlaceholders[] = {"{dir}", "{case}", "{op}", "{dtype}"};

// Index in kPlaceholders of the placeholder that starts at cmd[i]; -1 when none does.
int placeholder_at(const std::string& cmd, std::size_t i) {
  if (cmd[i] != '{') return -1;
  for (int k = 0; k < 4; ++k)
    if (cmd.compare(i, std::char_traits<char>::length(kPlaceholders[k]), kPlaceholders[k]) == 0) return k;
  return -1;
}

}  // namespace

Status check_placeholders_unquoted(const std::string& cmd) {
  // Shell quoting state while walking the command: a placeholder inside '...' or "..." would be
  // quoted twice, and '{dir}' with $(...) in the path ran that command (issue 10).
  enum { none, single, dbl } q = none;
  for (std::size_t i = 0; i < cmd.size(); ++i) {
    const char ch = cmd[i];
    if (const int k = q != none ? placeholder_at(cmd, i) : -1; k >= 0) {
      const std::string key = kPlaceholders[k];
      return Error{"--cmd: " + key + " is inside quotes; validate quotes every placeholder itself, so write " + key +
                   " without quotes around it (not \"" + key + "\" or '" + key + "')"};
    }
    if (q == single) {
      if (ch == '\'') q = none;
      continue;
    }
    if (ch == '\\') {
      ++i;
      continue;
    }
    if (q == dbl && ch == '"') {
      q = none;
      continue;
    }
    if (q == none && ch == '\'') {
      q = single;
      continue;
    }
    if (q == none && ch == '"') {
      q = dbl;
      continue;
    }
  }
  return Status::ok();
}

std::string expand_command(const std::string& cmd, const std::string& dir,
                           const std::string& case_name, const std::string& op,
                           const std::string& dtype) {
  const std::string* values[] = {&dir, &case_name, &op, &dtype};  // kPlaceholders' order
  std::string out;
  for (std::size_t i = 0; i < cmd.size();) {
    if (const int k = placeholder_at(cmd, i); k >= 0) {
      out += shell_quote(*values[k]);
      i += std::char_traits<char>::length(kPlaceholders[k]);
    } else {
      out += cmd[i++];
    }
  }
  return out;
}

std::unique_ptr<Runner> make_exec_runner(const ExecOptions& opt, const layout::LayoutSet& layouts) {
  return std::make_unique<ExecRunner>(opt, layouts);
}

}  // namespace validate::runners
