#include "cuda/kernel_recorder.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "core/check.h"

#ifdef HAYATE_HAVE_CUPTI
#include <cupti.h>
#endif

namespace hayate::cuda {

#ifdef HAYATE_HAVE_CUPTI
namespace {

std::string short_name(const char* mangled) {
  if (!mangled) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string n = (status == 0 && d) ? d : mangled;
  std::free(d);
  if (n.rfind("void ", 0) == 0) n = n.substr(5);  // "void ns::k<half>(args)" -> "ns::k<half>"
  for (size_t at; (at = n.find("(anonymous namespace)::")) != std::string::npos;) n.erase(at, 23);
  int depth = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i] == '<') ++depth;
    if (n[i] == '>') --depth;
    if (n[i] == '(' && depth == 0) {
      n.resize(i);
      break;
    }
  }
  return n;
}

// CUPTI hands completed buffers to plain C callbacks without a user pointer,
// so the records of the one recording (recordings do not overlap: start()
// refuses a second) collect here.
struct Sink {
  std::mutex mu;
  std::vector<KernelRecord> records;
  bool active = false;
};
Sink& sink() {
  static Sink s;
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  constexpr size_t kBytes = 4 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = *buffer ? kBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Sink& s = sink();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      s.records.push_back({short_name(k->name), k->start, k->end});
    }
  }
  std::free(buffer);
}

std::string cupti_error(CUptiResult r) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  return msg ? msg : "unknown CUPTI error";
}

}  // namespace

std::unique_ptr<KernelRecorder> KernelRecorder::start(std::string* why_not) {
  Sink& s = sink();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.active) {
      *why_not = "a kernel recording is already running";
      return nullptr;
    }
    s.records.clear();
  }
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    *why_not = "CUPTI activity records are not available here (" + cupti_error(r) + ")";
    return nullptr;
  }
  s.active = true;
  return std::unique_ptr<KernelRecorder>(new KernelRecorder);
}

std::vector<KernelRecord> KernelRecorder::stop() {
  HAYATE_CHECK(!stopped_, "kernel recorder: stopped twice");
  stopped_ = true;
  cuptiActivityFlushAll(1);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mu);
  s.active = false;
  std::vector<KernelRecord> out = std::move(s.records);
  s.records.clear();
  std::sort(out.begin(), out.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  return out;
}

KernelRecorder::~KernelRecorder() {
  if (!stopped_) stop();
}

#else  // no CUPTI in this build

std::unique_ptr<KernelRecorder> KernelRecorder::start(std::string* why_not) {
  *why_not = "this build has no CUPTI (libcupti was not found at configure time)";
  return nullptr;
}
std::vector<KernelRecord> KernelRecorder::stop() { return {}; }
KernelRecorder::~KernelRecorder() = default;

#endif

}  // namespace hayate::cuda
