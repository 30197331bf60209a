// Fused in-place Position Encoding Generator for CPU inference:
//   tokens[b, e + h*W + w, c] += bias[c] + sum_ij weight[c, i, j] *
//       tokens[b, e + (h+i-p)*W + (w+j-p), c]        (zero outside the map)
// with e leading (class) tokens left untouched and p = (k - 1) / 2.
//
// Why our own kernel: in PyTorch the PEG is three memory-bound passes over
// the token map (a dense copy of the patch tokens, which are not one dense
// tensor when a class token leads them; the depth-wise convolution; the
// residual add). Here each token is read from memory once and written once:
// a task (one image, one block of channels) keeps the k original rows of
// its window in a small zero-bordered buffer, so the map can be overwritten
// row by row in place.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kBlock = 64;  // channels per task: the window stays in L1/L2

// Output row h of one task (one image, channels [c0, c0 + n)) from the
// window rows h-p .. h+p, any odd k (the ablations' kernels and the last,
// partial block of channels).
inline void peg_row(float* out, const float* win, int64_t h, int64_t W,
                    int64_t C, int64_t k, const float* wt, const float* bias,
                    int64_t n) {
  const int64_t p = k / 2;
  const int64_t row = (W + 2 * p) * kBlock;  // floats per window row
  const float* centre = win + (h % k) * row;
  for (int64_t w = 0; w < W; ++w) {
    float acc[kBlock];
    const float* id = centre + (w + p) * kBlock;
    for (int64_t c = 0; c < n; ++c) acc[c] = id[c] + bias[c];
    for (int64_t i = 0; i < k; ++i) {
      const float* src = win + ((h + i + k - p) % k) * row + w * kBlock;
      const float* wr = wt + i * k * C;
      for (int64_t j = 0; j < k; ++j) {
        const float* s = src + j * kBlock;
        const float* wv = wr + j * C;
        for (int64_t c = 0; c < n; ++c) acc[c] += wv[c] * s[c];
      }
    }
    std::memcpy(out + w * C, acc, n * sizeof(float));
  }
}

// GCC/Clang vector of 16 floats: one AVX-512 register in the x86-64-v4
// clone, two AVX2 registers in the v3 one, four SSE registers otherwise.
typedef float vec16 __attribute__((vector_size(64)));
// The helpers below are inlined into each clone, so no vec16 crosses a call
// and the warning about its calling convention does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

inline vec16 load16(const float* p) {
  vec16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void store16(float* p, const vec16& v) { std::memcpy(p, &v, sizeof(v)); }

// peg_row for the paper's PEG (k = 3) on a full block: per 16 channels the
// nine taps' weights stay in registers for the whole row.
inline void peg_row_3x3(float* out, const float* win, int64_t h, int64_t W,
                        int64_t C, const float* wt, const float* bias) {
  const int64_t row = (W + 2) * kBlock;
  const float* rows[3] = {win + ((h + 2) % 3) * row, win + (h % 3) * row,
                          win + ((h + 1) % 3) * row};
  for (int64_t c = 0; c < kBlock; c += 16) {
    vec16 wv[9];
    for (int t = 0; t < 9; ++t) wv[t] = load16(wt + t * C + c);
    const vec16 b = load16(bias + c);
    for (int64_t w = 0; w < W; ++w) {
      const int64_t o = w * kBlock + c;
      vec16 acc = load16(rows[1] + o + kBlock) + b;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          acc += wv[i * 3 + j] * load16(rows[i] + o + j * kBlock);
      store16(out + w * C + c, acc);
    }
  }
}

// Each clone is compiled for its instruction set and the loader picks the
// best one the CPU has (GCC function multi-versioning).
// -DMMCPVT_SINGLE_TARGET builds for the compiler's target only (the tests
// build each instruction set this way, whatever the CPU running them picks).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(MMCPVT_SINGLE_TARGET)
#define MMCPVT_TARGET_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MMCPVT_TARGET_CLONES
#endif

// One task: the H x W map of one image (token stride C floats, starting at
// `x`), channels [c0, c0 + n). `win` holds k rows of W + 2p tokens x kBlock
// channels, a ring indexed by row modulo k.
MMCPVT_TARGET_CLONES
void peg_block(float* x, int64_t H, int64_t W, int64_t C, int64_t k,
               const float* wt, const float* bias, int64_t c0, int64_t n,
               float* win) {
  const int64_t p = k / 2;
  const int64_t row = (W + 2 * p) * kBlock;
  // zero borders: rows outside the map, and p columns each side
  std::fill(win, win + k * row, 0.f);
  auto load = [&](int64_t h) {  // original row h into its ring slot
    float* dst = win + (h % k) * row + p * kBlock;
    if (h >= H) {
      std::fill(dst, dst + W * kBlock, 0.f);
      return;
    }
    const float* src = x + h * W * C + c0;
    if (n == kBlock)  // a constant size: inlined vector moves
      for (int64_t w = 0; w < W; ++w)
        std::memcpy(dst + w * kBlock, src + w * C, kBlock * sizeof(float));
    else
      for (int64_t w = 0; w < W; ++w)
        std::memcpy(dst + w * kBlock, src + w * C, n * sizeof(float));
  };
  for (int64_t h = 0; h < p; ++h) load(h);
  for (int64_t h = 0; h < H; ++h) {
    load(h + p);  // the window now holds the original rows h-p .. h+p
    float* out = x + h * W * C + c0;
    if (n == kBlock && k == 3)
      peg_row_3x3(out, win, h, W, C, wt + c0, bias + c0);
    else
      peg_row(out, win, h, W, C, k, wt + c0, bias + c0, n);
  }
}

at::Tensor peg_depthwise_(at::Tensor x, const at::Tensor& weight,
                          const std::optional<at::Tensor>& bias, int64_t H,
                          int64_t W) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat,
              "peg_depthwise_: expects float32 CPU tokens, got ",
              x.scalar_type(), " on ", x.device());
  TORCH_CHECK(x.dim() == 3, "peg_depthwise_: expects tokens (B, N, C), got ",
              x.sizes());
  TORCH_CHECK(weight.device().is_cpu(),
              "peg_depthwise_: expects the weight on the CPU, got ",
              weight.device());
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2);
  const int64_t k = weight.size(-1);
  TORCH_CHECK(weight.dim() == 4 && weight.size(0) == C && weight.size(1) == 1
                  && weight.size(2) == k && k % 2 == 1,
              "peg_depthwise_: expects a depth-wise (C, 1, k, k) weight with "
              "odd k and C = ", C, ", got ", weight.sizes());
  TORCH_CHECK(N >= H * W, "peg_depthwise_: ", N, " tokens for a ", H, "x",
              W, " map");
  TORCH_CHECK(x.stride(2) == 1 && x.stride(1) == C,
              "peg_depthwise_: the tokens of an image must be dense");
  const int64_t extra = N - H * W;
  // (C, 1, k, k) -> (k*k, C): each tap's weights contiguous over channels
  at::Tensor wt = weight.detach().reshape({C, k * k}).t().contiguous()
                      .to(at::kFloat);
  at::Tensor b = bias.has_value() && bias->defined()
                     ? bias->detach().contiguous().to(at::kFloat)
                     : at::zeros({C}, x.options());
  const float* wp = wt.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* xp = x.data_ptr<float>();
  const int64_t sB = x.stride(0);
  const int64_t blocks = (C + kBlock - 1) / kBlock;
  const int64_t p = k / 2;
  at::parallel_for(0, B * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> win(k * (W + 2 * p) * kBlock);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t bi = t / blocks, c0 = (t % blocks) * kBlock;
      peg_block(xp + bi * sB + extra * C, H, W, C, k, wp, bp, c0,
                std::min(kBlock, C - c0), win.data());
    }
  });
  return x;
}

}  // namespace

// torch.ops.mmcpvt; -DMMCPVT_OPS_NAMESPACE=name registers another namespace,
// so that the tests can load single-target builds beside the installed one.
#ifndef MMCPVT_OPS_NAMESPACE
#define MMCPVT_OPS_NAMESPACE mmcpvt
#endif
// one more level of macros, so that the namespace macro is expanded before
// TORCH_LIBRARY pastes it into names
#define MMCPVT_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define MMCPVT_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

MMCPVT_LIBRARY(MMCPVT_OPS_NAMESPACE, m) {
  m.def("peg_depthwise_(Tensor(a!) x, Tensor weight, Tensor? bias, int H, "
        "int W) -> Tensor(a!)");
}

MMCPVT_LIBRARY_IMPL(MMCPVT_OPS_NAMESPACE, CPU, m) {
  m.impl("peg_depthwise_", &peg_depthwise_);
}
