#include "validate/cases/readme.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "validate/cases/refset.hpp"
#include "validate/core/version.hpp"
#include "validate/ops/registry.hpp"

namespace validate::cases {

CaseSummary summarize(const Case& c) {
  CaseSummary r;
  auto shape = [](const std::vector<TensorInfo>& t, std::size_t i) {
    return i < t.size() ? shape_to_string(t[i].shape) : std::string("-");
  };
  const auto mt = c.tensors(Op::matmul);
  r.matmul_a = shape(mt, 0);
  r.matmul_b = shape(mt, 1);
  if (c.ops.empty()) return r;
  const OpInstance& first = c.ops.front();
  const auto ft = c.tensors(first.op());
  r.k = ops::find(first.op()).reduction_length(first.params);
  r.first_input = shape(ft, 0);
  r.second_input = shape(ft, 1);
  return r;
}

std::string set_readme(const std::vector<Case>& list, const std::string& origin, std::uint64_t seed,
                       const std::string& fill) {
  std::string s;
  s += "# validate reference set\n\n";
  s += fmt::format("Format `{}`, written by validate {} (commit {}).\n\n", kReferenceFormat,
                   harness_version(), harness_git_commit());
  s += fmt::format("{} case(s) from {}, seed {}, fill `{}`.\n\n", list.size(), origin, seed, fill);
  s += "## What is inside\n\n"
       "- `<dtype>/<case>_conv2d_{input,weight,bias,target}.npy`: inputs (canonical PyTorch "
       "layout, C order: NCHW, OIHW)\n"
       "- `<dtype>/<case>_conv2d_{output,loss,grad_input,grad_weight,grad_bias}.npy`: LibTorch's "
       "results\n"
       "- `<dtype>/<case>_matmul_{A,B,target,output,loss,grad_A,grad_B}.npy`: the conv's im2col "
       "GEMM, row-major A[M,K], B[K,N]\n"
       ;
  // Ops beyond the default pairing, one line each (none in a conv2d/matmul set).
  for (const ops::OpDef* d : ops::registry()) {
    if (d->id() == Op::conv2d || d->id() == Op::matmul) continue;
    std::string names;
    for (const auto& c : list)
      if (const OpInstance* inst = c.find(d->id()); inst && names.empty())
        for (const auto& t : d->tensors(inst->params)) names += (names.empty() ? "" : ",") + t.name;
    if (!names.empty())
      s += fmt::format("- `<dtype>/<case>_{}_{{{}}}.npy`: inputs and LibTorch's results\n", d->name(), names);
  }
  if (std::any_of(list.begin(), list.end(), [](const Case& c) { return c.train.has_value(); }))
    s += "- training cases (metadata `train`): `<dtype>/<case>_<op>_train_loss.npy`, the loss of every optimizer "
         "step (float32), and `<dtype>/<case>_<op>_step<k>_{<param>,grad_<param>}.npy`, each parameter as step k "
         "used it (float32: the master copy) and its gradient, at steps 0, 1, every `checkpoint_every`-th and the last (docs/training.md)\n";
  s += "- `<dtype>/<case>_metadata.json`: shapes, parameters, layouts, roles and the SHA-256 of "
       "every tensor\n"
       "- `config.json` (the expanded case file), `system_info.json` (versions, device, TF32 "
       "flags), `manifest.json` (every file's size and SHA-256; written last)\n\n"
       "float32 and bfloat16 tensors are stored as `<f4` (bfloat16 values are exact in float32), "
       "float16 as `<f2`; the loss is a 0-d float32 array.\n"
       "A tensor's `sha256` in metadata is the SHA-256 of its values as little-endian float32 in C "
       "order.\n\n";
  s += "## Load and verify with numpy\n\n```python\nimport hashlib, json, numpy as np\n"
       "meta = json.load(open('float32/CASE_metadata.json'))\n"
       "for name, t in meta['ops']['conv2d']['tensors'].items():\n"
       "    a = np.load('float32/' + t['file'])\n"
       "    assert list(a.shape) == t['shape']\n"
       "    assert hashlib.sha256(a.astype('<f4').tobytes()).hexdigest() == t['sha256'], "
       "name\n```\n\n"
       "Or: `validate verify <this directory>` (exit 0: every file and hash matches).\n\n## "
       "Cases\n\n"
       "| dtype | case | K | conv input | conv weight | matmul A | matmul B "
       "|\n|---|---|---|---|---|---|---|\n";
  for (const auto& c : list) {
    const CaseSummary r = summarize(c);
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", dtype_name(c.dtype), c.name, r.k, r.first_input,
                     r.second_input, r.matmul_a, r.matmul_b);
  }
  // Only a set whose case file names input distributions: every other README is unchanged.
  bool dists = std::any_of(list.begin(), list.end(), [](const Case& c) { return !c.input_dists.empty(); });
  if (dists) {
    s += "\n## Input distributions\n\nInputs not listed are the normal fill (metadata `inputs`; "
         "docs/cli.md, \"Input distributions\").\n\n";
    for (const auto& c : list)
      if (!c.input_dists.empty()) s += fmt::format("- {}/{}: {}\n", dtype_name(c.dtype), c.name, describe(c.input_dists));
  }
  return s;
}

}  // namespace validate::cases
