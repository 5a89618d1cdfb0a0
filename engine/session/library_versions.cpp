#include "session/library_versions.h"

#include <Eigen/Core>
#include <H5public.h>
#include <google/protobuf/stubs/common.h>
#include <nlohmann/json.hpp>
#include <oneapi/tbb/version.h>
#include <unicode/uvernum.h>
#include <zlib.h>

namespace qs {

namespace {

std::string dotted(long a, long b, long c)
{
    return std::to_string(a) + "." + std::to_string(b) + "." + std::to_string(c);
}

} // namespace

std::vector<LibraryVersion> engineLibraryVersions()
{
    unsigned h5Major = 0, h5Minor = 0, h5Release = 0;
    const bool h5 = H5get_libversion(&h5Major, &h5Minor, &h5Release) >= 0;
    std::vector<LibraryVersion> v;
    v.push_back({"oneTBB", TBB_VERSION_STRING, TBB_runtime_version()});
    v.push_back({"Eigen", dotted(EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION), {}});
    v.push_back({"HDF5", dotted(H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE),
                 h5 ? dotted(h5Major, h5Minor, h5Release) : std::string()});
    v.push_back({"ONNX", QUANTSCOPE_ONNX_VERSION, {}});
    v.push_back({"protobuf",
                 dotted(GOOGLE_PROTOBUF_VERSION / 1000000, GOOGLE_PROTOBUF_VERSION / 1000 % 1000,
                        GOOGLE_PROTOBUF_VERSION % 1000),
                 {}});
    v.push_back({"zlib", ZLIB_VERSION, zlibVersion()});
    v.push_back({"ICU", U_ICU_VERSION, {}});
    v.push_back({"nlohmann_json",
                 dotted(NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH),
                 {}});
    return v;
}

} // namespace qs
