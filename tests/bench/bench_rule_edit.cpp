// Rule edit -> layer table updated, as the app does it: a Workspace on a model,
// one rule's weight_qtype edited through the rule table (what a cell edit
// does), timed until the layer table holds the new weights' errors. Prints the
// synchronous part (the edit returning on the GUI thread) and the whole
// latency, fastest and median of N edits alternating int8 and int4.
//
//     bench_rule_edit MODEL.onnx [EDITS]
//
// A benchmark, not a test: CTest does not run it (docs/benchmarks.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <QApplication>
#include <QEventLoop>
#include <QTimer>

#include <nlohmann/json.hpp>

#include "gui/workspace.h"
#include "widgets/rule_table_model.h"

namespace {

double milliseconds(std::chrono::steady_clock::duration d)
{
    return std::chrono::duration<double, std::milli>(d).count();
}

// Runs the event loop until `signal` of `sender` fires (or 10 minutes pass).
template <class Signal> bool waitFor(const qs::Workspace* sender, Signal signal)
{
    QEventLoop loop;
    QObject::connect(sender, signal, &loop, &QEventLoop::quit);
    QTimer::singleShot(600000, &loop, [&loop] { loop.exit(1); });
    return loop.exec() == 0;
}

void report(const char* what, std::vector<double> ms)
{
    std::sort(ms.begin(), ms.end());
    std::printf("%-34s fastest %8.2f ms   median %8.2f ms   (%zu edits)\n", what, ms.front(), ms[ms.size() / 2],
                ms.size());
}

} // namespace

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_rule_edit MODEL.onnx [EDITS]\n");
        return 2;
    }
    const int edits = argc > 2 ? std::max(2, std::atoi(argv[2])) : 10;
    qs::Workspace workspace;
    QObject::connect(&workspace, &qs::Workspace::logMessage, [](const QString& text, qs::LogLevel level) {
        if (level != qs::LogLevel::Info)
            std::fprintf(stderr, "log: %s\n", qPrintable(text));
    });
    workspace.openModel(QString::fromLocal8Bit(argv[1]));
    if (!waitFor(&workspace, &qs::Workspace::modelLoaded))
        return 1;
    int64_t parameters = 0;
    for (const auto& l : workspace.model()->layers)
        parameters += l.parameterCount;
    std::printf("model: %s, %zu layers, %lld weight parameters\n", argv[1], workspace.model()->layers.size(),
                static_cast<long long>(parameters));

    // One rule over every layer; the first weights job runs before timing.
    qs::RuleTableModel* rules = workspace.rules();
    rules->insertRule(0, nlohmann::ordered_json{{"weight_qtype", "int8"}}, "bench");
    waitFor(&workspace, &qs::Workspace::weightsUpdated);

    std::vector<double> synchronous, whole;
    for (int i = 0; i < edits; ++i) {
        const char* qtype = i % 2 == 0 ? "int4" : "int8";
        const auto start = std::chrono::steady_clock::now();
        rules->setField(0, "weight_qtype", qtype);
        synchronous.push_back(milliseconds(std::chrono::steady_clock::now() - start));
        if (!waitFor(&workspace, &qs::Workspace::weightsUpdated))
            return 1;
        whole.push_back(milliseconds(std::chrono::steady_clock::now() - start));
    }
    report("edit returns (GUI thread)", synchronous);
    report("edit -> layer table updated", whole);
    return 0;
}
