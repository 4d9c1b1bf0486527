// Every layer type (one file pair each in models/layers/, the interface in models/layer.h).
#pragma once
#include "models/layer.h"
#include "models/layers/activations.h"
#include "models/layers/add.h"
#include "models/layers/conv2d.h"
#include "models/layers/conv_transpose2d.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/max_pool2d.h"
