#pragma once
// Synthetic calibration data: standard-normal float inputs shaped like the
// model's inputs (symbolic dimensions after the batch axis are an Error), from
// a seed so a run can be repeated. Ranges calibrated on it say nothing about
// real data: the app shows a warning wherever it is used.

#include <cstdint>
#include <random>

#include "io/data_source.h"

namespace qs {

class SyntheticDataSource final : public DataSource {
public:
    // Throws Error naming the model input whose type or shape cannot be synthesised.
    SyntheticDataSource(const Model& model, int64_t samples, uint64_t seed, const DataSourceOptions& options);

protected:
    Tensor readRows(size_t index, int64_t count) override;
    void restart() override;

private:
    uint64_t seed_;
    std::mt19937_64 random_;
};

} // namespace qs
