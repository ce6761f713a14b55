#pragma once
// Umbrella header for validate::layout: specs, the permute engine, conversion, presets, probes.
#include "validate/layout/convert.hpp"
#include "validate/layout/permute.hpp"
#include "validate/layout/preset.hpp"
#include "validate/layout/probe.hpp"
#include "validate/layout/spec.hpp"
