#pragma once
// A file in a private temporary folder that a fuzz target rewrites with each
// input, for parsers that read from a path (safetensors, npz: they map the
// file). The folder is made once per process and removed at exit.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace qs::fuzz {

class ScratchFile {
public:
    explicit ScratchFile(const std::string& fileName)
    {
        std::string pattern = (std::filesystem::temp_directory_path() / "quantscope-fuzz-XXXXXX").string();
        if (!mkdtemp(pattern.data()))
            std::abort();
        folder_ = pattern;
        path_ = folder_ / fileName;
    }
    ~ScratchFile()
    {
        std::error_code ignored;
        std::filesystem::remove_all(folder_, ignored);
    }
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    // Replaces the file's content; aborts if the disk refuses (not a finding).
    const std::filesystem::path& write(const uint8_t* data, size_t size)
    {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
        if (!out)
            std::abort();
        return path_;
    }

private:
    std::filesystem::path folder_;
    std::filesystem::path path_;
};

} // namespace qs::fuzz
