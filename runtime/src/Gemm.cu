//===- Gemm.cu - matmuls through cuBLASLt ---------------------------------===//

#include "ContextImpl.h"

#include <algorithm>
#include <cstdio>

namespace cnnrt {

void releaseMatmuls(Context::Impl &I) {
  for (MatmulEntry &m : I.matmuls) {
    if (!m.valid)
      continue;
    cublasLtMatmulDescDestroy(m.desc);
    cublasLtMatrixLayoutDestroy(m.aL);
    cublasLtMatrixLayoutDestroy(m.bL);
    cublasLtMatrixLayoutDestroy(m.cL);
  }
}

void Context::registerMatmul(int id, const MatmulDesc &d, const char *loc) {
  Impl &I = *impl_;
  if (I.prepared)
    fail(loc, "registerMatmul after prepare finished");
  if (id < 0)
    fail(loc, "negative matmul id");
  if (static_cast<size_t>(id) >= I.matmuls.size())
    I.matmuls.resize(id + 1);
  MatmulEntry &m = I.matmuls[id];
  if (m.valid)
    fail(loc, "matmul id " + std::to_string(id) + " registered twice");
  if (d.dtype != DType::F32 && d.dtype != DType::F16)
    fail(loc, "matmul dtype must be f32 or f16");
  if (d.M <= 0 || d.N <= 0 || d.K <= 0)
    fail(loc, "matmul with an empty dimension");
  m.d = d;
  m.loc = loc;
  // Row-major C[M,N] = op(A) op(B) is column-major C^T[N,M] = op(B)^T op(A)^T.
  // cuBLASLt's first operand is our B, its second our A.
  cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  if (d.dtype == DType::F32 && opts_.allowTF32)
    ct = CUBLAS_COMPUTE_32F_FAST_TF32;
  CNNRT_CUBLAS(*this, cublasLtMatmulDescCreate(&m.desc, ct, CUDA_R_32F), loc);
  m.valid = true;
  cublasOperation_t opFirst = d.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = d.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  CNNRT_CUBLAS(*this,
               cublasLtMatmulDescSetAttribute(m.desc,
                                              CUBLASLT_MATMUL_DESC_TRANSA,
                                              &opFirst, sizeof(opFirst)),
               loc);
  CNNRT_CUBLAS(*this,
               cublasLtMatmulDescSetAttribute(m.desc,
                                              CUBLASLT_MATMUL_DESC_TRANSB,
                                              &opSecond, sizeof(opSecond)),
               loc);
  cudaDataType_t t = cudaType(d.dtype);
  // First operand (our B): stored row-major [K,N] -> col-major N x K, ld N;
  // transB: stored [N,K] -> col-major K x N, ld K.
  if (d.transB)
    CNNRT_CUBLAS(*this, cublasLtMatrixLayoutCreate(&m.aL, t, d.K, d.N, d.K),
                 loc);
  else
    CNNRT_CUBLAS(*this, cublasLtMatrixLayoutCreate(&m.aL, t, d.N, d.K, d.N),
                 loc);
  // Second operand (our A): stored [M,K] -> col-major K x M, ld K;
  // transA: stored [K,M] -> col-major M x K, ld M.
  if (d.transA)
    CNNRT_CUBLAS(*this, cublasLtMatrixLayoutCreate(&m.bL, t, d.M, d.K, d.M),
                 loc);
  else
    CNNRT_CUBLAS(*this, cublasLtMatrixLayoutCreate(&m.bL, t, d.K, d.M, d.K),
                 loc);
  CNNRT_CUBLAS(*this, cublasLtMatrixLayoutCreate(&m.cL, t, d.N, d.M, d.N), loc);
  cublasLtMatmulPreference_t pref;
  CNNRT_CUBLAS(*this, cublasLtMatmulPreferenceCreate(&pref), loc);
  size_t wsLimit = I.matmulWsLimit;
  CNNRT_CUBLAS(*this,
               cublasLtMatmulPreferenceSetAttribute(
                   pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsLimit,
                   sizeof(wsLimit)),
               loc);
  cublasLtMatmulHeuristicResult_t heur[8];
  int got = 0;
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
      I.lt, m.desc, m.aL, m.bL, m.cL, m.cL, pref, 8, heur, &got);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || got == 0)
    fail(loc,
         std::string("cublasLtMatmulAlgoGetHeuristic found no algorithm "
                     "for M=") +
             std::to_string(d.M) + " N=" + std::to_string(d.N) +
             " K=" + std::to_string(d.K) + " (" + cublasErr(s) + ")",
         ErrorKind::Cublas);
  m.algo = heur[0].algo;
  m.ws = heur[0].workspaceSize;
  I.neededWorkspace = std::max(I.neededWorkspace, m.ws);
  if (opts_.verbose)
    std::fprintf(stderr, "cnnrt: %s matmul M=%lld N=%lld K=%lld ws %zu\n", loc,
                 (long long)d.M, (long long)d.N, (long long)d.K, m.ws);
}

void Context::matmul(int id, const void *A, const void *B, void *C,
                     bool accumulate) {
  auto &v = impl_->matmuls;
  if (id < 0 || static_cast<size_t>(id) >= v.size() || !v[id].valid)
    fail("matmul", "matmul id " + std::to_string(id) + " was not registered");
  MatmulEntry &m = v[id];
  if (!impl_->prepared)
    fail(m.loc.c_str(), "matmul used before finishPrepare()");
  float alpha = 1.f, beta = accumulate ? 1.f : 0.f;
  CNNRT_CUBLAS(*this,
               cublasLtMatmul(impl_->lt, m.desc, &alpha, B, m.aL, A, m.bL,
                              &beta, C, m.cL, C, m.cL, &m.algo,
                              impl_->workspace, m.ws, stream_),
               m.loc.c_str());
  profileMark(*this, m.loc.c_str(), "cuBLASLt matmul");
}

} // namespace cnnrt
