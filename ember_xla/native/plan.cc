#include "plan.h"

#include <algorithm>
#include <memory>
#include <string>

namespace ember {

namespace {

ffi::Error Invalid(std::string msg) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::move(msg));
}

std::string DimsString(const ffi::AnyBuffer& b) {
  std::string s = "[";
  auto dims = b.dimensions();
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

template <typename I>
void Resolve(const I* idx, int64_t count, int64_t n, const Options& opt, int64_t* src) {
  for (int64_t j = 0; j < count; ++j) src[j] = ResolveOne(static_cast<int64_t>(idx[j]), n, opt);
}

// Segment ids already in order (non-decreasing, all in [0, rows), the usual sample-major
// layout): the stable counting sort would leave every lookup where it is, so only row_ptr is
// built, in one pass. Returns false (plan untouched apart from row_ptr) when they are not.
template <typename I>
bool SortedSegments(const I* seg, int64_t count, Plan* plan) {
  const int64_t rows = plan->rows;
  std::vector<int64_t>& row_ptr = plan->row_ptr;
  row_ptr.resize(rows + 1);
  int64_t r = 0;  // row_ptr[0..r] are set
  row_ptr[0] = 0;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t s = static_cast<int64_t>(seg[j]);
    if (s < r || s >= rows) return false;
    while (r < s) row_ptr[++r] = j;
  }
  while (r < rows) row_ptr[++r] = count;
  return true;
}

}  // namespace

std::string_view DtypeName(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return "f32";
    case ffi::DataType::BF16: return "bf16";
    case ffi::DataType::F16: return "f16";
    case ffi::DataType::F64: return "f64";
    case ffi::DataType::S32: return "s32";
    case ffi::DataType::S64: return "s64";
    default: return "unsupported type";
  }
}

ffi::Error ParseOptions(std::string_view combiner, std::string_view index_mode,
                        bool wrap_negative, bool weighted, double init, int64_t index_bits,
                        Options* out) {
  if (combiner == "sum") out->combiner = Combiner::kSum;
  else if (combiner == "max") out->combiner = Combiner::kMax;
  else if (combiner == "min") out->combiner = Combiner::kMin;
  else if (combiner == "mean") out->combiner = Combiner::kMean;
  else if (combiner == "sqrt_n") out->combiner = Combiner::kSqrtN;
  else
    return Invalid("ember: attribute combiner must be one of sum, max, min, mean, sqrt_n; got '" +
                   std::string(combiner) + "'");
  if (index_mode == "clip") out->clip = true;
  else if (index_mode == "fill") out->clip = false;
  else if (index_mode == "zero") out->clip = false, out->fill_zero = true;
  else
    return Invalid("ember: attribute index_mode must be clip, fill or zero; got '" +
                   std::string(index_mode) + "'");
  if (index_bits != 32 && index_bits != 64)
    return Invalid("ember: attribute index_bits must be 32 or 64; got " +
                   std::to_string(index_bits));
  out->index32 = index_bits == 32;
  out->wrap_negative = wrap_negative;
  out->weighted = weighted;
  out->init = init;
  return ffi::Error::Success();
}

ffi::Error CheckTableAndResult(const ffi::AnyBuffer& table, const ffi::AnyBuffer& out,
                               bool rows_bf16) {
  const auto t = table.element_type();
  if (t != ffi::DataType::F32 && t != ffi::DataType::BF16 && t != ffi::DataType::F16)
    return Invalid("ember: table must be f32, bf16 or f16, got " + std::string(DtypeName(t)));
  if (rows_bf16 && t != ffi::DataType::F32)
    return Invalid("ember: row_type=bf16 reads an f32 table, got " + std::string(DtypeName(t)));
  if (table.dimensions().size() != 2)
    return Invalid("ember: table must have rank 2 [N, D], got shape " + DimsString(table));
  // rows read as bf16 are a bf16 table's: a bf16 result is theirs
  const auto rows = rows_bf16 ? ffi::DataType::BF16 : t;
  if (out.element_type() != rows && out.element_type() != ffi::DataType::F32)
    return Invalid("ember: result type " + std::string(DtypeName(out.element_type())) +
                   " must be the rows' type (" + std::string(DtypeName(rows)) + ") or f32");
  if (out.dimensions().size() != 2 || out.dimensions()[1] != table.dimensions()[1])
    return Invalid("ember: result must be [rows, D] with D = " +
                   std::to_string(table.dimensions()[1]) + ", got " + DimsString(out));
  return ffi::Error::Success();
}

ffi::Error ResolveIndices(const ffi::AnyBuffer& idx, int64_t n_rows, const Options& opt,
                          std::vector<int64_t>* src) {
  const int64_t count = static_cast<int64_t>(idx.element_count());
  if (count > 0 && n_rows == 0 && opt.clip)
    return Invalid("ember: index_mode=clip needs a table with at least one row");
  src->resize(count);
  switch (idx.element_type()) {
    case ffi::DataType::S32:
      Resolve(static_cast<const int32_t*>(idx.untyped_data()), count, n_rows, opt, src->data());
      return ffi::Error::Success();
    case ffi::DataType::S64:
      Resolve(static_cast<const int64_t*>(idx.untyped_data()), count, n_rows, opt, src->data());
      return ffi::Error::Success();
    default:
      return Invalid("ember: indices must be s32 or s64, got " +
                     std::string(DtypeName(idx.element_type())));
  }
}

namespace {
void ResetPlan(Plan& plan, int64_t lookups, int64_t rows) {
  const size_t keep = static_cast<size_t>(std::max<int64_t>({lookups, rows + 1, 1 << 16})) * 4;
  for (auto* v : {&plan.row_ptr, &plan.src, &plan.pos, &plan.scratch_a, &plan.scratch_b}) {
    v->clear();
    if (v->capacity() > keep) v->shrink_to_fit();
  }
  plan.rows = rows;
  plan.raw = nullptr;
}
}  // namespace

Plan& ScratchPlan(int64_t lookups, int64_t rows) {
  thread_local Plan plan;
  ResetPlan(plan, lookups, rows);
  return plan;
}

Plan& ScratchPlanAt(size_t slot, int64_t lookups, int64_t rows) {
  thread_local std::vector<std::unique_ptr<Plan>> plans;
  if (plans.size() <= slot) plans.resize(slot + 1);
  if (!plans[slot]) plans[slot] = std::make_unique<Plan>();
  ResetPlan(*plans[slot], lookups, rows);
  return *plans[slot];
}

ffi::Error SortBySegment(const ffi::AnyBuffer& segment_ids, bool need_pos, Plan* plan) {
  const int64_t n_seg = static_cast<int64_t>(segment_ids.element_count());
  if (n_seg == static_cast<int64_t>(plan->src.size())) {
    bool sorted_ids = false;
    if (segment_ids.element_type() == ffi::DataType::S32)
      sorted_ids = SortedSegments(static_cast<const int32_t*>(segment_ids.untyped_data()), n_seg,
                                  plan);
    else if (segment_ids.element_type() == ffi::DataType::S64)
      sorted_ids = SortedSegments(static_cast<const int64_t*>(segment_ids.untyped_data()), n_seg,
                                  plan);
    if (sorted_ids) {
      plan->pos.clear();  // lookup j is plan entry j
      return ffi::Error::Success();
    }
  }
  std::vector<int64_t>& seg = plan->scratch_a;
  std::vector<int64_t>& sorted = plan->scratch_b;
  if (auto e = ReadInts(segment_ids, "segment_ids", &seg); e.failure()) return e;
  const int64_t rows = plan->rows, count = static_cast<int64_t>(seg.size());
  std::vector<int64_t>& row_ptr = plan->row_ptr;
  row_ptr.assign(rows + 1, 0);
  for (int64_t s : seg)
    if (s >= 0 && s < rows) ++row_ptr[s + 1];
  for (int64_t r = 0; r < rows; ++r) row_ptr[r + 1] += row_ptr[r];
  const int64_t kept = row_ptr[rows];
  sorted.resize(kept);
  if (need_pos) plan->pos.resize(kept);
  int64_t* pos = need_pos ? plan->pos.data() : nullptr;
  const int64_t* src = plan->src.data();
  // row_ptr[s] serves as segment s's fill cursor, then is shifted back.
  for (int64_t j = 0; j < count; ++j) {
    const int64_t s = seg[j];
    if (s < 0 || s >= rows) continue;
    const int64_t k = row_ptr[s]++;
    sorted[k] = src[j];
    if (pos) pos[k] = j;
  }
  for (int64_t r = rows; r > 0; --r) row_ptr[r] = row_ptr[r - 1];
  row_ptr[0] = 0;
  plan->src.swap(sorted);
  return ffi::Error::Success();
}

ffi::Error BuildSegmentPlan(const ffi::AnyBuffer& indices, const ffi::AnyBuffer& segment_ids,
                            int64_t n_rows, const Options& opt, bool need_pos, Plan* plan) {
  const auto it = indices.element_type();
  const int64_t count = static_cast<int64_t>(indices.element_count());
  if (count > 0 && n_rows == 0 && opt.clip)
    return Invalid("ember: index_mode=clip needs a table with at least one row");
  if ((it == ffi::DataType::S32 || it == ffi::DataType::S64) &&
      static_cast<int64_t>(segment_ids.element_count()) == count) {
    bool sorted_ids = false;
    if (segment_ids.element_type() == ffi::DataType::S32)
      sorted_ids = SortedSegments(static_cast<const int32_t*>(segment_ids.untyped_data()), count,
                                  plan);
    else if (segment_ids.element_type() == ffi::DataType::S64)
      sorted_ids = SortedSegments(static_cast<const int64_t*>(segment_ids.untyped_data()), count,
                                  plan);
    if (sorted_ids) {
      plan->src.clear();
      plan->pos.clear();  // lookup j is plan entry j
      plan->raw = indices.untyped_data();
      plan->raw64 = it == ffi::DataType::S64;
      plan->n_rows = n_rows;
      plan->opt = opt;
      return ffi::Error::Success();
    }
  }
  if (auto e = ResolveIndices(indices, n_rows, opt, &plan->src); e.failure()) return e;
  return SortBySegment(segment_ids, need_pos, plan);
}

ffi::Error ReadInts(const ffi::AnyBuffer& buf, std::string_view what, std::vector<int64_t>* out) {
  const size_t count = buf.element_count();
  out->resize(count);
  if (buf.element_type() == ffi::DataType::S32) {
    auto* p = static_cast<const int32_t*>(buf.untyped_data());
    for (size_t j = 0; j < count; ++j) (*out)[j] = p[j];
  } else if (buf.element_type() == ffi::DataType::S64) {
    auto* p = static_cast<const int64_t*>(buf.untyped_data());
    for (size_t j = 0; j < count; ++j) (*out)[j] = p[j];
  } else {
    return Invalid("ember: " + std::string(what) + " must be s32 or s64, got " +
                   std::string(DtypeName(buf.element_type())));
  }
  return ffi::Error::Success();
}

ffi::Error GetWeights(ffi::RemainingArgs rest, const Options& opt, const ffi::AnyBuffer& table,
                      const ffi::AnyBuffer& out, const ffi::AnyBuffer& like, const void** data,
                      ffi::DataType* type, size_t reserved) {
  *data = nullptr;
  *type = table.element_type();
  const size_t n = rest.size() - reserved;
  if (n > 1)
    return Invalid("ember: too many operands (" + std::to_string(n) +
                   " after the lookups; only an optional weights operand may follow)");
  if (!opt.weighted) {
    if (n == 1) return Invalid("ember: weights operand given but weighted=false");
    return ffi::Error::Success();
  }
  if (n == 0) return Invalid("ember: weighted=true but no weights operand");
  auto w = rest.get<ffi::AnyBuffer>(0);
  if (!w.has_value()) return Invalid("ember: the weights operand must be an array");
  const ffi::AnyBuffer& wb = *w;
  if (wb.element_type() != table.element_type() && wb.element_type() != out.element_type())
    return Invalid("ember: weights type " + std::string(DtypeName(wb.element_type())) +
                   " must be the table's (" + std::string(DtypeName(table.element_type())) +
                   ") or the result's (" + std::string(DtypeName(out.element_type())) + ")");
  auto wd = wb.dimensions();
  auto ld = like.dimensions();
  bool same = wd.size() == ld.size();
  for (size_t i = 0; same && i < wd.size(); ++i) same = wd[i] == ld[i];
  if (!same)
    return Invalid("ember: weights shape " + DimsString(wb) + " must equal the lookups' shape " +
                   DimsString(like));
  *data = wb.untyped_data();
  *type = wb.element_type();
  return ffi::Error::Success();
}

}  // namespace ember
