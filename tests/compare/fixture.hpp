#pragma once
// Small reference sets and run directories built by the tests themselves (no generator, no
// LibTorch): tensors are seeded normals written with the core .npy writer, metadata comes from
// cases::case_metadata (docs/formats.md), run files follow docs/formats.md.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/cases/refset.hpp"
#include "validate/cases/scale_check.hpp"
#include "validate/cases/scale_file.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"

namespace validate::testing {

inline cases::Case small_case(DType dtype, const std::string& name = "k0018_ic002") {
  cases::Case c;
  c.name = name;
  c.dtype = dtype;
  cases::ConvParams p;
  p.n = 1;
  p.c = 2;
  p.h = 4;
  p.w = 4;
  p.o = 3;
  p.kh = 3;
  p.kw = 3;
  c.ops = cases::Case::conv_with_im2col(c.name, p).ops;  // matmul M 16, K 18, N 3
  return c;
}

inline std::string key_of(const cases::Case& c, cases::Op op, const std::string& tensor) {
  return std::string(dtype_name(c.dtype)) + "/" + c.name + "/" + cases::op_name(op) + "/" + tensor;
}

// Deterministic tensor contents; matmul output = A * B (so recomputation hypotheses can be tested).
inline Tensor make_tensor(const cases::Case& c, cases::Op op, const cases::TensorInfo& t,
                          const std::map<std::string, Tensor>& done) {
  const DType storage = t.role == cases::Role::loss ? DType::float32 : storage_dtype(c.dtype);
  Tensor out(storage, t.shape);
  const std::string key = key_of(c, op, t.name);
  std::seed_seq seq(key.begin(), key.end());
  std::mt19937 gen(seq);
  std::normal_distribution<double> dist(0.0, 1.0);
  if (t.role == cases::Role::loss) {
    out.set(0, 1.25 + 0.1 * dist(gen));
    return out;
  }
  if (op == cases::Op::matmul && t.name == "output") {
    const Tensor& A = done.at("A");
    const Tensor& B = done.at("B");
    const std::int64_t M = A.shape()[0], K = A.shape()[1], N = B.shape()[1];
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += A.get(m * K + k) * B.get(k * N + n);
        out.set(m * N + n, round_to_dtype(static_cast<float>(s), c.dtype));
      }
    return out;
  }
  for (std::int64_t i = 0; i < out.numel(); ++i)
    out.set(i, round_to_dtype(static_cast<float>(dist(gen)), c.dtype));
  return out;
}

using TensorHook = std::function<void(const std::string& key, Tensor& t)>;

// With `scales`, every output and gradient gets an error-bound scale (|x| + 1), float32 as sets
// of an earlier version stored them or, with `float16_scales`, as generate stores them now
// (cases::store_scale); without, the set is one made before scales existed.
inline void write_reference(const std::string& dir, const std::vector<cases::Case>& cs,
                            const TensorHook& hook = {}, bool scales = false, bool float16_scales = false) {
  for (const auto& c : cs) {
    const std::string ddir = dir + "/" + std::string(dtype_name(c.dtype));
    (void)fs::make_dirs(ddir);
    std::map<std::string, cases::TensorRecord> records;
    for (const auto& inst : c.ops) {  // conv2d and matmul, or the ops a test's case has
      const cases::Op op = inst.op();
      std::map<std::string, Tensor> done;
      for (const auto& t : c.tensors(op)) {
        Tensor x = make_tensor(c, op, t, done);
        if (hook) hook(key_of(c, op, t.name), x);
        const std::string file = c.file_name(op, t.name);
        (void)npy::write(ddir + "/" + file, x);
        records[file] = cases::TensorRecord{tensor_sha256(x), x.dtype(), std::nullopt, std::nullopt};
        done.emplace(t.name, std::move(x));
      }
      // Scales go in once the op's tensors are on disk: |x| + 1, held under the ceiling a scale
      // of these inputs can have (cases/scale_check.hpp), which compare enforces.
      auto limits = cases::scale_limits(cases::RefCase{c, Json::object(), ddir}, op);
      for (const auto& t : c.tensors(op)) {
        const Tensor& x = done.at(t.name);
        if (scales && c.has_bound_scale(t)) {
          double cap = INFINITY;
          if (limits)
            if (auto l = limits->find(t.name); l != limits->end() && l->second.ceiling) cap = 0.99 * *l->second.ceiling;
          Tensor s(DType::float32, x.shape());
          for (std::int64_t i = 0; i < x.numel(); ++i) s.set(i, std::min(std::fabs(x.get(i)) + 1, cap));
          const std::string sf = c.file_name(op, t.name + "_scale");
          std::optional<int> unit;
          if (float16_scales) {
            cases::StoredScale stored = cases::store_scale(s);
            s = std::move(stored.values);
            unit = stored.unit_log2;
          }
          (void)npy::write(ddir + "/" + sf, s);
          records[sf] = cases::TensorRecord{sha256_hex(s.bytes(), s.nbytes()), s.dtype(), std::nullopt, unit};
        }
      }
    }
    (void)write_json(ddir + "/" + c.name + "_metadata.json", cases::case_metadata(c, records));
  }
  auto files = cases::hash_tree(dir);
  (void)cases::write_manifest(dir, cases::kReferenceFormat, *files);
}

struct RunSpec {
  TensorHook mutate;                         // change a produced tensor before it is written
  std::function<void(Json& case_doc)> edit;  // change a <case>_run.json document
  std::set<std::string> skip_files;          // keys whose file is not written (but still declared)
  std::string backend = "test";
};

// A run that reproduces the reference exactly, then altered by `spec`.
inline void write_run(const std::string& ref, const std::string& dir, const RunSpec& spec = {}) {
  auto loaded = cases::load_cases(ref);
  for (const auto& rc : *loaded) {
    const auto& c = rc.c;
    const std::string dt(dtype_name(c.dtype));
    (void)fs::make_dirs(dir + "/" + dt);
    Json doc = {{"case", c.name}, {"dtype", dt}, {"ops", Json::object()}};
    for (const auto& inst : c.ops) {
      const cases::Op op = inst.op();
      Json produced = Json::array(), hashes = Json::object();
      for (const auto& t : c.tensors(op)) {
        auto x = npy::read(rc.dtype_dir + "/" + c.file_name(op, t.name));
        if (t.role == cases::Role::input) {
          hashes[t.name] = tensor_sha256(*x);
          continue;
        }
        const std::string key = key_of(c, op, t.name);
        if (spec.mutate) spec.mutate(key, *x);
        produced.push_back(t.name);
        if (!spec.skip_files.count(key))
          (void)npy::write(dir + "/" + dt + "/" + c.file_name(op, t.name), *x);
      }
      doc["ops"][cases::op_name(op)] = {{"outcome", "ok"},
                                        {"message", ""},
                                        {"produced", produced},
                                        {"input_hashes", hashes},
                                        {"elapsed_s", 0.0}};
    }
    if (spec.edit) spec.edit(doc);
    (void)write_json(dir + "/" + dt + "/" + c.name + "_run.json", doc);
  }
  (void)write_json(dir + "/run_info.json", {{"format", cases::kRunFormat},
                                            {"backend", spec.backend},
                                            {"device", "cpu"},
                                            {"variants", Json::array()}});
  auto files = cases::hash_tree(dir);
  (void)cases::write_manifest(dir, cases::kRunFormat, *files);
}

// Re-lists everything under a run (variants written after it included) in its manifest: the run a
// consistent backend would have written.
inline void relist_run(const std::string& run) {
  auto files = cases::hash_tree(run);
  (void)cases::write_manifest(run, cases::kRunFormat, *files);
}

// Overwrites one run tensor file (after write_run) as the backend itself would have written it:
// the run's manifest is updated too (a file that differs from it is tampering, another test).
inline void rewrite_run_tensor(const std::string& run, const cases::Case& c, cases::Op op,
                               const std::string& tensor, const Tensor& t) {
  (void)npy::write(run + "/" + std::string(dtype_name(c.dtype)) + "/" + c.file_name(op, tensor), t);
  relist_run(run);
}

inline Tensor read_tensor(const std::string& set, const cases::Case& c, cases::Op op,
                          const std::string& tensor) {
  auto t = npy::read(set + "/" + std::string(dtype_name(c.dtype)) + "/" + c.file_name(op, tensor));
  return std::move(*t);
}

// The canonical tensor `t` (C order, axes `axes`) stored in axis order `to` (C order) with the
// original shape label kept, as a writer that confused layouts would hand it over.
inline Tensor permuted_bytes(const Tensor& t, const std::vector<int>& to) {
  Tensor out(t.dtype(), t.shape());
  const Shape& s = t.shape();
  const std::size_t r = s.size();
  std::int64_t stride[8] = {},
               idx[8] = {};  // rank <= 8 (fixed arrays: GCC 12 misreports vectors here)
  std::int64_t st = 1;
  for (std::size_t j = r; j-- > 0;) {
    stride[to[j]] = st;
    st *= s[static_cast<std::size_t>(to[j])];
  }
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < r; ++a) off += idx[a] * stride[a];
    out.set(off, t.get(i));
    for (std::size_t a = r; a-- > 0;) {
      if (++idx[a] < s[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

}  // namespace validate::testing
