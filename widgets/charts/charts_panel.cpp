#include "widgets/charts/charts_panel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QStackedWidget>
#include <QTabWidget>
#include <QVBoxLayout>

#include "graph/model.h"
#include "runtime/activation_calibration.h"
#include "quantization/quantization_plan.h"
#include "quantization/weight_quantizer.h"
#include "rules/ruleset.h"
#include "session/evaluation.h"
#include "widgets/charts/algorithm_comparison_view.h"
#include "widgets/charts/distribution_view.h"
#include "widgets/charts/layer_error_view.h"
#include "widgets/charts/method_comparison_view.h"
#include "widgets/charts/scale_range_view.h"
#include "widgets/jobs/job_tracker.h"

namespace qs {
namespace {

// `t` (float32) with its axes permuted: result axis i is input axis axes[i].
// The weight quantizer lays a tiled weight out with its contraction axis last;
// the views need the values in that layout's order.
Tensor permuted(const Tensor& t, const std::vector<int>& axes)
{
    const Shape& in = t.shape();
    Shape out(axes.size());
    for (size_t i = 0; i < axes.size(); ++i)
        out[i] = in[size_t(axes[i])];
    const Shape inStrides = rowMajorStrides(in);
    Tensor result(DType::F32, out);
    const std::span<const float> src = t.values<float>();
    const std::span<float> dst = result.mutableValues<float>();
    std::vector<int64_t> index(out.size(), 0);
    for (int64_t flat = 0; flat < result.numel(); ++flat) {
        int64_t offset = 0;
        for (size_t i = 0; i < out.size(); ++i)
            offset += index[i] * inStrides[size_t(axes[i])];
        dst[size_t(flat)] = src[size_t(offset)];
        for (size_t i = out.size(); i-- > 0;) {
            if (++index[i] < out[i])
                break;
            index[i] = 0;
        }
    }
    return result;
}

const LayerQuantization* planLayer(const QuantizationPlan* plan, size_t layer)
{
    if (!plan)
        return nullptr;
    for (const LayerQuantization& lq : plan->layers())
        if (lq.layer == layer)
            return &lq;
    return nullptr;
}

QString describe(const QuantizationSpec& spec)
{
    return QString("%1, %2, %3")
        .arg(QString::fromUtf8(qtypeName(spec.qtype).data(), qsizetype(qtypeName(spec.qtype).size())),
             QString::fromStdString(spec.method.toString()),
             spec.granularity == Granularity::PerTensor ? QString("per tensor")
             : spec.tileSize                            ? QString("tiles of %1").arg(*spec.tileSize)
                                                        : QString("per channel"));
}

} // namespace

ChartsPanel::ChartsPanel(QWidget* parent)
    : QWidget(parent), jobs_(new JobTracker(this)), subject_(new QComboBox(this)), header_(new QLabel(this)),
      distribution_(new DistributionView(jobs_, this)), methods_(new MethodComparisonView(jobs_, this)),
      algorithms_(new AlgorithmComparisonView(jobs_, this)), methodsMode_(new QComboBox(this)),
      methodsStack_(new QStackedWidget(this)), scales_(new ScaleRangeView(jobs_, this)),
      layerErrors_(new LayerErrorView(this))
{
    subject_->addItems({tr("Weight"), tr("Input activation")});
    subject_->setToolTip(tr("What the distribution and method views show"));
    connect(subject_, &QComboBox::currentIndexChanged, this, [this] { refreshLayer(); });
    auto* tabs = new QTabWidget(this);
    tabs->addTab(distribution_, tr("Distribution"));
    methodsMode_->addItems({tr("Calibration methods"), tr("Algorithms")});
    methodsMode_->setToolTip(tr("Compare calibration methods, or the weight-rounding algorithms (rtn, gptq, awq, "
                                "adaround, ± bias correction, lutN) on the layer's weight"));
    methodsStack_->addWidget(methods_);
    methodsStack_->addWidget(algorithms_);
    connect(methodsMode_, &QComboBox::currentIndexChanged, this, [this](int index) {
        methodsStack_->setCurrentIndex(index);
        refreshAlgorithms();
    });
    auto* methodsTab = new QWidget(this);
    auto* methodsLayout = new QVBoxLayout(methodsTab);
    methodsLayout->setContentsMargins(0, 0, 0, 0);
    auto* modeRow = new QHBoxLayout;
    modeRow->addWidget(new QLabel(tr("Compare:"), methodsTab));
    modeRow->addWidget(methodsMode_);
    modeRow->addStretch();
    methodsLayout->addLayout(modeRow);
    methodsLayout->addWidget(methodsStack_, 1);
    tabs->addTab(methodsTab, tr("Methods"));
    tabs->addTab(scales_, tr("Scale ranges"));
    tabs->addTab(layerErrors_, tr("Layer errors"));
    auto* top = new QHBoxLayout;
    top->addWidget(header_, 1);
    top->addWidget(subject_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(top);
    layout->addWidget(tabs, 1);

    connect(layerErrors_, &LayerErrorView::layerClicked, this, [this](size_t layer) {
        setSelectedLayer(layer);
        emit layerClicked(layer);
    });
    connect(layerErrors_, &LayerErrorView::keepFloatProposed, this, &ChartsPanel::keepFloatProposed);
    connect(methods_, &MethodComparisonView::methodApplied, this, [this](const QString& method) {
        if (layer_)
            emit methodApplied(*layer_, method, methods_->isActivation());
    });
    connect(algorithms_, &AlgorithmComparisonView::algorithmApplied, this,
            [this](const nlohmann::ordered_json& fields) {
                if (layer_)
                    emit algorithmApplied(*layer_, fields);
            });
    refreshLayer();
}

ChartsPanel::~ChartsPanel() = default;

void ChartsPanel::setModel(std::shared_ptr<const Model> model)
{
    model_ = std::move(model);
    plan_.reset();
    weights_.reset();
    rules_.reset();
    stats_.reset();
    evaluation_.reset();
    sensitivity_.reset();
    layer_.reset();
    refreshLayer();
    refreshLayerErrors();
}

void ChartsPanel::setPlan(std::shared_ptr<const QuantizationPlan> plan, std::shared_ptr<const WeightQuantizer> weights,
                          std::shared_ptr<const RuleSet> rules)
{
    plan_ = std::move(plan);
    weights_ = std::move(weights);
    rules_ = std::move(rules);
    refreshLayer();
    refreshLayerErrors();
}

void ChartsPanel::setActivationStatistics(std::shared_ptr<const ActivationStatistics> stats)
{
    stats_ = std::move(stats);
    if (showsActivation())
        refreshLayer();
    refreshAlgorithms();
}

void ChartsPanel::setEvaluation(std::shared_ptr<const EvaluationResult> eval)
{
    evaluation_ = std::move(eval);
    refreshLayerErrors();
}

void ChartsPanel::setSensitivity(std::shared_ptr<const SensitivityResult> s)
{
    sensitivity_ = std::move(s);
    refreshLayerErrors();
}

void ChartsPanel::setSelectedLayer(std::optional<size_t> layer)
{
    if (layer == layer_)
        return;
    layer_ = layer;
    refreshLayer();
}

void ChartsPanel::setShowActivation(bool activation)
{
    subject_->setCurrentIndex(activation ? 1 : 0);
}

bool ChartsPanel::showsActivation() const
{
    return subject_->currentIndex() == 1;
}

void ChartsPanel::setCompareAlgorithms(bool algorithms)
{
    methodsMode_->setCurrentIndex(algorithms ? 1 : 0);
}

bool ChartsPanel::comparesAlgorithms() const
{
    return methodsMode_->currentIndex() == 1;
}

void ChartsPanel::refreshAlgorithms()
{
    if (!comparesAlgorithms())
        return; // computed only when shown: it rounds the weight once per variant
    if (!model_ || !layer_ || *layer_ >= model_->layers.size()) {
        algorithmsShown_.reset();
        algorithms_->clear(tr("Select a quantized layer to compare algorithms on it."));
        return;
    }
    if (!rules_) {
        algorithmsShown_.reset();
        algorithms_->clear(tr("Waiting for the rules' plan."));
        return;
    }
    auto now = std::make_tuple(*layer_, static_cast<const void*>(stats_.get()), rules_->toJson());
    if (algorithmsShown_ && *algorithmsShown_ == now)
        return;
    algorithmsShown_ = std::move(now);
    algorithms_->show(model_, rules_, *layer_, stats_);
}

void ChartsPanel::refreshLayerErrors()
{
    if (!model_) {
        layerErrors_->setData({});
        return;
    }
    std::map<size_t, ErrorMetrics> weightMetrics;
    if (weights_)
        for (const auto& [layer, w] : weights_->weights())
            weightMetrics[layer] = w->metrics;
    layerErrors_->setData(layerErrors(*model_, evaluation_.get(), weightMetrics, sensitivity_.get()));
}

void ChartsPanel::refreshLayer()
{
    if (!model_ || !layer_ || *layer_ >= model_->layers.size()) {
        shown_.reset();
        header_->setText(model_ ? tr("No layer selected.") : tr("No model."));
        const QString why = tr("Select a quantized layer.");
        distribution_->clear(why);
        methods_->clear(why);
        scales_->clear(why);
        refreshAlgorithms();
        return;
    }
    refreshAlgorithms();
    header_->setText(QString::fromStdString(model_->layers[*layer_].modulePath) + " (" +
                     QString::fromStdString(model_->layers[*layer_].opType) + ")");
    Shown now{layer_, showsActivation(), nullptr, stats_.get(), {}};
    if (weights_)
        if (const auto it = weights_->weights().find(*layer_); it != weights_->weights().end())
            now.weight = it->second.get();
    if (const LayerQuantization* lq = planLayer(plan_.get(), *layer_); lq && lq->activation)
        now.activationMethod =
            lq->activation->method.toString() + "/" + lq->activation->value + "/" +
            std::string(qtypeName(lq->activation->target.qtype)) + "/" +
            std::to_string(lq->activation->target.options.narrowRange) + "/" +
            std::string(scaleRestrictionName(lq->activation->target.options.restriction)) + "/" +
            (lq->activation->target.symmetric ? std::to_string(*lq->activation->target.symmetric) : "");
    if (!now.activation)
        now.stats = nullptr; // statistics do not change what a weight looks like
    if (shown_ && *shown_ == now && now.weight)
        return;
    shown_ = now;
    showWeight(*layer_);
    if (showsActivation())
        showActivation(*layer_);
}

void ChartsPanel::showWeight(size_t layer)
{
    const QuantizableLayer& l = model_->layers[layer];
    const LayerQuantization* lq = planLayer(plan_.get(), layer);
    std::shared_ptr<const QuantizedWeight> qw;
    if (weights_)
        if (const auto it = weights_->weights().find(layer); it != weights_->weights().end())
            qw = it->second;
    const Tensor* tensor = model_->initializer(l.weightName);
    if (!qw || !tensor) {
        QString why = tr("The weight of %1 is not quantized.").arg(QString::fromStdString(l.modulePath));
        if (lq && !lq->problem.empty())
            why = QString::fromStdString(lq->problem);
        else if (weights_ && weights_->problems().count(layer))
            why = QString::fromStdString(weights_->problems().at(layer));
        else if (!tensor)
            why = tr("The model holds no weight '%1'.").arg(QString::fromStdString(l.weightName));
        if (!showsActivation()) {
            distribution_->clear(why);
            methods_->clear(why);
        }
        scales_->clear(why);
        return;
    }
    Tensor x = tensor->toFloat32();
    Tensor fake = WeightQuantizer::fakeQuantOf(*model_, *qw);
    QuantizationSpec spec = qw->spec;
    int axis = spec.axis < 0 ? spec.axis + x.rank() : spec.axis;
    if (!qw->transposedAxes.empty()) {
        x = permuted(x, qw->transposedAxes);
        fake = permuted(fake, qw->transposedAxes);
        for (size_t i = 0; i < qw->transposedAxes.size(); ++i)
            if (qw->transposedAxes[i] == axis) {
                axis = int(i);
                break;
            }
        spec.axis = axis;
    }
    auto q = std::shared_ptr<const TensorQuantization>(qw, &qw->quantization);
    const QString name = QString::fromStdString(l.weightName);
    // Per-tensor weights still have channels: the views show them against the one range.
    const int channelAxis = axis;
    if (!showsActivation()) {
        distribution_->showWeight(x, fake, q, channelAxis, name, describe(qw->spec));
        methods_->showWeight(x, spec, name);
    }
    if (hasOwnBlockScales(spec.qtype))
        scales_->clear(tr("%1 computes its own block scales.").arg(QString::fromUtf8(qtypeName(spec.qtype).data())));
    else
        scales_->showWeight(x, q, channelAxis, name);
}

void ChartsPanel::showActivation(size_t layer)
{
    const LayerQuantization* lq = planLayer(plan_.get(), layer);
    if (!lq || !lq->activation) {
        const QString why = tr("The input activation of this layer is not quantized (no act_qtype).");
        distribution_->clear(why);
        methods_->clear(why);
        return;
    }
    const ActivationQuantization& act = *lq->activation;
    const auto observed =
        stats_ ? stats_->observers().find(act.value) : std::map<std::string, Observer>::const_iterator();
    if (!stats_ || observed == stats_->observers().end()) {
        const QString why = tr("Run calibration to see the activation '%1'.").arg(QString::fromStdString(act.value));
        distribution_->clear(why);
        methods_->clear(why);
        return;
    }
    if (isMicroscaling(act.target.qtype)) {
        const QString why = tr("%1 computes its own block scales per batch.")
                                .arg(QString::fromUtf8(qtypeName(act.target.qtype).data()));
        distribution_->clear(why);
        methods_->clear(why);
        return;
    }
    const QString description =
        QString("%1, %2, per tensor")
            .arg(QString::fromUtf8(qtypeName(act.target.qtype).data()), QString::fromStdString(act.method.toString()));
    distribution_->showActivation(stats_, act, description);
    methods_->showActivation(stats_, act.value, act.target);
}

} // namespace qs
