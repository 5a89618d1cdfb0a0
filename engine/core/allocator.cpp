#include "core/allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib> // defines __GLIBC__ with glibc (the check below without it compiled to nothing)
#include <deque>
#include <mutex>
#include <new>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace qs {

namespace {

constexpr std::align_val_t kTensorAlignment{64}; // keeps vector loads aligned and rows off shared cache lines

std::atomic<bool> keepLargeBlocks{false};

// Freed large tensor blocks, the most recently freed last.
class KeptBlocks {
public:
    // A kept block for `bytes`, and its own size (nullptr: none fits).
    std::pair<void*, size_t> take(size_t bytes)
    {
        const std::lock_guard lock(mutex_);
        auto best = blocks_.end();
        for (auto it = blocks_.begin(); it != blocks_.end(); ++it)
            if (it->bytes >= bytes && it->bytes - bytes <= bytes / 8 &&
                (best == blocks_.end() || it->bytes < best->bytes))
                best = it;
        if (best == blocks_.end())
            return {nullptr, 0};
        const Block taken = *best;
        total_ -= taken.bytes;
        blocks_.erase(best);
        return {taken.data, taken.bytes};
    }

    void keep(void* data, size_t bytes)
    {
        std::deque<Block> evicted;
        {
            const std::lock_guard lock(mutex_);
            blocks_.push_back({data, bytes});
            total_ += bytes;
            while (total_ > kKeptBlocksMaxBytes) {
                total_ -= blocks_.front().bytes;
                evicted.push_back(blocks_.front());
                blocks_.pop_front();
            }
        }
        for (const Block& b : evicted)
            ::operator delete[](b.data, kTensorAlignment);
    }

    size_t total()
    {
        const std::lock_guard lock(mutex_);
        return total_;
    }

private:
    struct Block {
        void* data;
        size_t bytes;
    };
    std::mutex mutex_;
    std::deque<Block> blocks_;
    size_t total_ = 0;
};

// Never destroyed: tensors may be freed by static destructors after it would be.
KeptBlocks& keptBlocks()
{
    static KeptBlocks* blocks = new KeptBlocks;
    return *blocks;
}

} // namespace

void keepFreedMemoryForReuse()
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's largest allowed value on 64-bit
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
    keepLargeBlocks = true;
}

std::shared_ptr<void> allocateTensorStorage(size_t bytes)
{
    bytes = std::max<size_t>(bytes, 1);
    if (bytes < kKeptBlockMinBytes || !keepLargeBlocks)
        return {::operator new[](bytes, kTensorAlignment), [](void* p) { ::operator delete[](p, kTensorAlignment); }};
    auto [data, blockBytes] = keptBlocks().take(bytes);
    if (!data) {
        data = ::operator new[](bytes, kTensorAlignment);
        blockBytes = bytes;
    }
    return {data, [blockBytes](void* p) {
                if (keepLargeBlocks)
                    keptBlocks().keep(p, blockBytes);
                else
                    ::operator delete[](p, kTensorAlignment);
            }};
}

size_t keptTensorBlockBytes()
{
    return keptBlocks().total();
}

} // namespace qs
