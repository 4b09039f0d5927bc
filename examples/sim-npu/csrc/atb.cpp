/*
 * libatb.so stand-in (abi.md §4, §7). Built twice, with
 * -D_GLIBCXX_USE_CXX11_ABI=0 (-> atb/cxx_abi_0/lib) and =1
 * (-> atb/cxx_abi_1/lib), so every symbol whose signature mentions
 * std::string gets the spelling of that ABI, exactly like the real pair.
 *
 * The classes are real C++ declared in the real namespaces, so the
 * compiler produces the mangled names a tracer interposes; nothing is
 * spelled by hand. All members are defined out of line and the DSO is
 * -fPIC without -fno-semantic-interposition, so calls between them (e.g.
 * stub_atb_run -> Runner::Execute -> Probe::IsSaveTensorBefore ->
 * StoreUtil::SaveLaunchParam) go through the PLT and can be interposed by
 * an LD_PRELOAD library.
 *
 * Struct layouts are the ones msMemScope hard-codes (§4.4); they are
 * plain-old-data here and pinned with static_asserts.
 *
 * Behaviour without a tracer: the Probe switches are off, so Execute only
 * launches its one kernel ("<OpName>Kernel") through
 * rtKernelLaunchWithHandleV2 in libruntime.so. With msMemScope-style Probe
 * overrides returning true, Execute also calls SaveLaunchParam with
 * "<save dir>/<OpName>Kernel/before" and ".../after". After its kernel,
 * Execute writes 0xA5 into the first (up to 16) bytes of every output
 * tensor, so a test can check that the operator really ran.
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unistd.h>

#include "sim_npu.h"

#define ATB_EXPORT __attribute__((visibility("default")))

namespace Mki {

/* Mki::SVector<T, 48>: inline storage first, then the size. */
template <typename T, std::size_t N = 48> struct SVector {
    T storage_[N + 1];
    std::size_t size_;
};

struct StdVectorI64 {   /* layout of std::vector<int64_t> (same in both ABIs) */
    int64_t *begin;
    int64_t *end;
    int64_t *cap;
};

struct TensorDesc {
    int32_t dtype;
    int32_t format;
    SVector<int64_t> dims;
    StdVectorI64 strides;
    int64_t offset;
};

struct Tensor {
    TensorDesc desc;
    void *data;
    std::size_t dataSize;
    void *hostData;
};

class ATB_EXPORT LaunchParam {
public:
    const SVector<Tensor> &GetInTensors();
    const SVector<Tensor> &GetOutTensors();

    SVector<Tensor> inTensors_;
    SVector<Tensor> outTensors_;
};

static_assert(sizeof(SVector<int64_t>) == 400, "Mki::SVector<int64_t>");
static_assert(offsetof(TensorDesc, strides) == 408, "Mki::TensorDesc.strides");
static_assert(sizeof(TensorDesc) == 440, "Mki::TensorDesc");
static_assert(offsetof(Tensor, data) == 440, "Mki::Tensor.data");
static_assert(sizeof(Tensor) == 464, "Mki::Tensor");
static_assert(sizeof(SVector<Tensor>) == 22744, "Mki::SVector<Tensor>");

const SVector<Tensor> &LaunchParam::GetInTensors()
{
    return inTensors_;
}

const SVector<Tensor> &LaunchParam::GetOutTensors()
{
    return outTensors_;
}

} // namespace Mki

namespace atb {

using Status = int32_t;

/* atb::SVector<T>: inline capacity 64 plus one spare; heap_ wins when set. */
template <typename T, std::size_t MAX = 64> struct SVector {
    std::size_t capacity_;
    std::size_t size_;
    T storage_[MAX + 1];
    T *heap_;
};

struct Dims {
    int64_t dims[8];
    uint64_t dimNum;
};

struct TensorDesc {
    int32_t dtype;    /* aclDataType */
    int32_t format;   /* aclFormat */
    Dims shape;
};

struct Tensor {
    TensorDesc desc;
    void *deviceData;
    void *hostData;
    uint64_t dataSize;
};

class Context {
public:
    void *stream;
};

class ContextBase : public Context {};

struct RunnerVariantPack {
    SVector<Tensor> inTensors;
    SVector<Tensor> outTensors;
    SVector<bool> isInTensorCanFree;
    SVector<bool> isOutTensorNeedMalloc;
    uint8_t *hostTilingBuffer;
    uint8_t *tilingBuffer;
    uint64_t tilingBufferSize;
    uint8_t *workspaceBuffer;
    uint64_t workspaceBufferSize;
    uint8_t *intermediateBuffer;
    uint64_t intermediateBufferSize;
    ContextBase *context;
};

static_assert(sizeof(Tensor) == 104, "atb::Tensor");
static_assert(offsetof(Tensor, deviceData) == 80, "atb::Tensor.deviceData");
static_assert(sizeof(SVector<Tensor>) == 6784, "atb::SVector<Tensor>");
static_assert(sizeof(SVector<bool>) == 96, "atb::SVector<bool>");
static_assert(offsetof(RunnerVariantPack, outTensors) == 6784, "outTensors");
static_assert(offsetof(RunnerVariantPack, isInTensorCanFree) == 13568, "isInTensorCanFree");
static_assert(offsetof(RunnerVariantPack, isOutTensorNeedMalloc) == 13664, "isOutTensorNeedMalloc");
static_assert(offsetof(RunnerVariantPack, hostTilingBuffer) == 13760, "hostTilingBuffer");
static_assert(offsetof(RunnerVariantPack, workspaceBuffer) == 13784, "workspaceBuffer");
static_assert(offsetof(RunnerVariantPack, intermediateBufferSize) == 13808, "intermediateBufferSize");
static_assert(offsetof(RunnerVariantPack, context) == 13816, "context");
static_assert(sizeof(RunnerVariantPack) == 13824, "RunnerVariantPack");

class ATB_EXPORT Runner {
public:
    explicit Runner(const std::string &name);
    Status Execute(RunnerVariantPack &runnerVariantPack);
    std::string GetOperationName() const;
    std::string GetSaveTensorDir() const;
    aclrtStream GetExecuteStream(Context *context) const;
    bool IsSaveTensor() const;

private:
    std::string name_;
    uint64_t executeCount_ = 0;
    void *kernelHandle_ = nullptr;
};

/* Dump switches. Real ATB reads them from its environment; the stand-in
 * keeps them off, so only a tracer's overrides turn the save path on. */
class ATB_EXPORT Probe {
public:
    static bool IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &opType);
    static bool IsSaveTensorAfter();
    static bool IsSaveTensorBefore();
    static bool IsExecuteCountInRange(uint64_t executeCount);
    static bool IsSaveTensorDesc();
};

class ATB_EXPORT StoreUtil {
public:
    static void SaveLaunchParam(void *stream, const Mki::LaunchParam &launchParam,
                                const std::string &dirPath);
};

bool Probe::IsTensorNeedSave(const std::vector<int64_t> &ids, const std::string &opType)
{
    (void)ids;
    (void)opType;
    return false;
}

bool Probe::IsSaveTensorAfter()
{
    return false;
}

bool Probe::IsSaveTensorBefore()
{
    return false;
}

bool Probe::IsExecuteCountInRange(uint64_t executeCount)
{
    (void)executeCount;
    return true;
}

bool Probe::IsSaveTensorDesc()
{
    return false;
}

/* Real ATB writes the kernel's tensors under dirPath; the stand-in has no
 * device data worth saving, so it does nothing. */
void StoreUtil::SaveLaunchParam(void *stream, const Mki::LaunchParam &launchParam,
                                const std::string &dirPath)
{
    (void)stream;
    (void)launchParam;
    (void)dirPath;
}

Runner::Runner(const std::string &name) : name_(name)
{
    std::string kernel = name_ + "Kernel";
    if (rtFuncGetByName(nullptr, kernel.c_str(), &kernelHandle_) != RT_ERROR_NONE)
        kernelHandle_ = nullptr;
}

std::string Runner::GetOperationName() const
{
    return name_;
}

std::string Runner::GetSaveTensorDir() const
{
    int32_t dev = 0;
    if (rtGetDevice(&dev) != RT_ERROR_NONE)
        dev = 0;
    return "/tmp/atb/" + std::to_string(dev) + "_" + std::to_string(getpid()) + "/" +
           std::to_string(executeCount_) + "_" + name_;
}

aclrtStream Runner::GetExecuteStream(Context *context) const
{
    return context ? context->stream : nullptr;
}

bool Runner::IsSaveTensor() const
{
    return false;
}

static void to_mki(const SVector<Tensor> &src, Mki::SVector<Mki::Tensor> &dst)
{
    const Tensor *elems = src.heap_ ? src.heap_ : src.storage_;
    std::size_t n = src.size_ < 48 ? src.size_ : 48;
    for (std::size_t i = 0; i < n; i++) {
        Mki::Tensor &t = dst.storage_[i];
        t.desc.dtype = elems[i].desc.dtype;
        t.desc.format = elems[i].desc.format;
        std::size_t nd = elems[i].desc.shape.dimNum < 8 ? elems[i].desc.shape.dimNum : 8;
        for (std::size_t d = 0; d < nd; d++)
            t.desc.dims.storage_[d] = elems[i].desc.shape.dims[d];
        t.desc.dims.size_ = nd;
        t.data = elems[i].deviceData;
        t.dataSize = elems[i].dataSize;
        t.hostData = elems[i].hostData;
    }
    dst.size_ = n;
}

Status Runner::Execute(RunnerVariantPack &runnerVariantPack)
{
    executeCount_++;
    aclrtStream stream = GetExecuteStream(runnerVariantPack.context);

    /* One kernel per operation. The Probe checks mirror the order real ATB
     * uses around each kernel. */
    std::unique_ptr<Mki::LaunchParam> lp(new Mki::LaunchParam());
    std::memset(static_cast<void *>(lp.get()), 0, sizeof(Mki::LaunchParam));
    to_mki(runnerVariantPack.inTensors, lp->inTensors_);
    to_mki(runnerVariantPack.outTensors, lp->outTensors_);

    const std::string kernelDir = GetSaveTensorDir() + "/" + name_ + "Kernel";
    const std::vector<int64_t> ids{0};
    const bool inRange = Probe::IsExecuteCountInRange(executeCount_);

    if (inRange && Probe::IsSaveTensorBefore() && Probe::IsTensorNeedSave(ids, name_))
        StoreUtil::SaveLaunchParam(stream, *lp, kernelDir + "/before");

    rtArgsEx_t args;
    std::memset(&args, 0, sizeof args);
    Status rc = rtKernelLaunchWithHandleV2(kernelHandle_, 0, 1, &args, nullptr, stream, nullptr);

    /* The "computation": mark the first bytes of every output with 0xA5, so
     * a caller can tell that the operator really ran (a tracer must never
     * skip it, abi.md §4.5). */
    {
        const SVector<Tensor> &outs = runnerVariantPack.outTensors;
        const Tensor *elems = outs.heap_ ? outs.heap_ : outs.storage_;
        std::size_t n = outs.heap_ ? outs.size_ : (outs.size_ < 65 ? outs.size_ : 65);
        for (std::size_t i = 0; i < n; i++) {
            if (elems[i].deviceData && elems[i].dataSize)
                std::memset(elems[i].deviceData, 0xA5,
                            elems[i].dataSize < 16 ? elems[i].dataSize : 16);
        }
    }

    if (inRange && Probe::IsSaveTensorAfter() && Probe::IsTensorNeedSave(ids, name_))
        StoreUtil::SaveLaunchParam(stream, *lp, kernelDir + "/after");

    if (IsSaveTensor() && Probe::IsSaveTensorDesc()) {
        /* Real ATB dumps the whole variant pack here; nothing to dump. */
    }
    return rc;
}

} // namespace atb

namespace {

std::mutex g_runners_lock;
std::map<std::string, std::unique_ptr<atb::Runner>> g_runners;

atb::Runner *runner_for(const std::string &name)
{
    std::lock_guard<std::mutex> guard(g_runners_lock);
    auto it = g_runners.find(name);
    if (it == g_runners.end())
        it = g_runners.emplace(name, std::unique_ptr<atb::Runner>(new atb::Runner(name))).first;
    return it->second.get();
}

void fill_tensors(atb::SVector<atb::Tensor> &vec, uint32_t n, void *const *data,
                  const uint64_t *sizes, std::vector<atb::Tensor> &heapStore)
{
    atb::Tensor *elems = vec.storage_;
    if (n > 64) {   /* more than the inline capacity: heap mode */
        heapStore.assign(n, atb::Tensor());
        elems = heapStore.data();
        vec.heap_ = elems;
        vec.capacity_ = n;
    }
    for (uint32_t i = 0; i < n; i++) {
        atb::Tensor &t = elems[i];
        t.desc.dtype = 1;    /* ACL_FLOAT16 */
        t.desc.format = 2;   /* ACL_FORMAT_ND */
        t.desc.shape.dims[0] = static_cast<int64_t>(sizes[i] / 2);
        t.desc.shape.dimNum = 1;
        t.deviceData = data[i];
        t.hostData = nullptr;
        t.dataSize = sizes[i];
    }
    vec.size_ = n;
}

} // namespace

/*
 * Test driver: runs one ATB operation named `opName` (e.g.
 * "LinearOperation") over caller-provided device buffers, the way an ATB
 * Operation::Execute would: it builds a RunnerVariantPack with the §4.4
 * layout (fp16, ND, 1-D tensors of size/2 elements), then calls
 * Runner::Execute through the PLT. One Runner is kept per opName, so its
 * execute count grows across calls. Returns Execute's status, or -1 on bad
 * arguments.
 */
extern "C" ATB_EXPORT int stub_atb_run(const char *opName, uint32_t nIn, void *const *inData,
                                       const uint64_t *inSizes, uint32_t nOut,
                                       void *const *outData, const uint64_t *outSizes,
                                       void *workspace, uint64_t workspaceSize, void *stream)
{
    if (!opName || (nIn && (!inData || !inSizes)) || (nOut && (!outData || !outSizes)))
        return -1;

    std::unique_ptr<atb::RunnerVariantPack> pack(new atb::RunnerVariantPack());
    std::memset(static_cast<void *>(pack.get()), 0, sizeof(atb::RunnerVariantPack));
    std::vector<atb::Tensor> inHeap, outHeap;
    fill_tensors(pack->inTensors, nIn, inData, inSizes, inHeap);
    fill_tensors(pack->outTensors, nOut, outData, outSizes, outHeap);
    pack->workspaceBuffer = static_cast<uint8_t *>(workspace);
    pack->workspaceBufferSize = workspaceSize;

    atb::ContextBase ctx;
    ctx.stream = stream;
    pack->context = &ctx;

    return runner_for(opName)->Execute(*pack);
}
