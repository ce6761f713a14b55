#pragma once
// What a run's own first two SGD updates can say about the settings it trained with
// (trajectory_own_update.cpp), and what they cannot. With g' = g + weight_decay·w:
//   step 1:  w0 − w1 = a1·g0'                                a1 = lr·(1 + momentum) with Nesterov, lr without
//   step 2:  w1 − w2 = alpha·g1' + beta·g0'                  plain momentum: alpha = lr·(1 − dampening), beta = lr·momentum
//                                                            Nesterov: alpha = lr·(1 + momentum·(1 − dampening)), beta = lr·momentum²
// (torch.optim.SGD starts the momentum buffer as the undamped g0'). Step 1 fixes a1 and the weight
// decay only: on a Nesterov step a learning rate and a momentum that give the same product fit it
// equally, and without Nesterov neither momentum nor dampening shows. Step 2, the first update
// that reads the buffer, separates them.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/train/schedule.hpp"

namespace validate::compare::detail {

struct LinearFit {
  double a = 0, b = 0;  // d ≈ a·x + b·y
  bool ok = false;
};
// Least squares of d on x and y; not ok when x and y are (nearly) parallel or zero.
LinearFit fit_two(const std::vector<double>& d, const std::vector<double>& x, const std::vector<double>& y);

// The coefficients of the first two updates (above).
struct UpdateCoefficients {
  double a1 = 0, alpha = 0, beta = 0;
};
UpdateCoefficients predicted_coefficients(const train::TrainConfig& c);

// The run's own parameters and gradients of steps 0 to 2 (w2 and g1 empty when the run has no
// step 2), one value per element.
struct OwnSteps {
  std::vector<double> w0, g0, w1, g1, w2;
};

// The run's step-1 coefficients: w0 − w1 = a·g0 + b·w0 (a = a1, b = a1·weight decay), when that form
// explains every element within 8 float32 ULP of the parameter plus `u` of each term.
std::optional<LinearFit> fit_first_update(const OwnSteps& s, double u);

// The run's step-2 coefficients (alpha, beta) with weight decay `wd`, when that form explains every
// element within 8 float32 ULP of the parameter plus `u` (the gradients' relative rounding) of each
// term; nothing otherwise, or with fewer than 3 elements (two coefficients fit any two).
std::optional<LinearFit> fit_second_update(const OwnSteps& s, double wd, double u);

// The relative tolerance on a coefficient: 1e-3, or the gradients' rounding when larger.
double coefficient_tolerance(double u);

// Whether the coefficients a setting predicts are the run's (a1 from step 1, `second` from step 2).
bool same_coefficients(const UpdateCoefficients& p, double a1, const LinearFit& second, double u);

// The settings that explain a first update a1 other than the case's, each alone: the learning
// rate always; with Nesterov a momentum (or no Nesterov, or momentum 0, when a1 = lr); without it,
// Nesterov applied (a1 = lr·(1 + momentum)) or dampening applied to the first step
// (a1 = lr·(1 − dampening)). Each with what it predicts for step 2.
struct Candidate {
  std::string setting;         // learning_rate, momentum, nesterov_missing, nesterov_applied, dampening_first_step
  std::string phrase;          // "learning rate 0.126667 instead of 0.1"
  nlohmann::json params;       // {"setting", and the run's value of it: "lr_run", "momentum_run", ...}
  UpdateCoefficients predicted;
};
std::vector<Candidate> first_update_candidates(double a1, const train::TrainConfig& c);

// The settings read from both updates, under the case's Nesterov flag: plain momentum gives
// lr = a1, momentum = beta / lr, dampening = 1 − alpha / lr; Nesterov solves
// momentum² / (1 + momentum) = beta / a1. Nothing when they are not settings (a momentum or a
// dampening outside [0, 1)).
struct SgdReading {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
};
std::optional<SgdReading> read_settings(double a1, double wd, const LinearFit& second, const train::TrainConfig& c,
                                        double u);

// Where a reading differs from the case's settings: "momentum 0.5 instead of 0.9", ...
std::vector<std::string> setting_differences(const SgdReading& r, const train::TrainConfig& c, double u);

// "weight decay missing (the case's is 0.01)", "weight decay 0.02 instead of 0.01", or nothing when
// `wd_run` is the case's within 5% (or 1e-5: the fit reads the float32 rounding of the stored
// weights as a weight decay of ~1e-6 at lr 0.1).
std::optional<std::string> weight_decay_difference(double wd_run, const train::TrainConfig& c);

}  // namespace validate::compare::detail
