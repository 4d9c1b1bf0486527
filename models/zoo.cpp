// The four seed models (DESIGN.md): the lecture's Net(hidden_num_chans), the MNIST MLP, the ConvNet
// of seed 002 and the convolutional Autoencoder of seed 000. Layer names follow the PyTorch modules'
// state_dict keys so parameter listings read like the lecture's.
#include <cctype>

#include "kernels/common/errors.h"
#include "models/net.h"

namespace dlb::models {

std::unique_ptr<Model> make_net(int hidden, int c, int h, int w) {
  auto m = std::make_unique<Model>("net" + std::to_string(hidden), Shape{1, c, h, w}, LossKind::cross_entropy);
  m->add<Conv2d>("conv1", c, hidden, 5).add<ReLU>().add<MaxPool2d>(2);
  m->add<Conv2d>("conv2", hidden, 16, 5).add<ReLU>().add<MaxPool2d>(2).add<Flatten>();
  const int flat = 16 * (((h - 4) / 2 - 4) / 2) * (((w - 4) / 2 - 4) / 2);  // 400 for 32x32
  m->add<Linear>("fc1", flat, 120).add<ReLU>().add<Linear>("fc2", 120, 84).add<ReLU>().add<Linear>("fc3", 84, 10);
  return m;
}

std::unique_ptr<Model> make_mlp(int c, int h, int w) {
  auto m = std::make_unique<Model>("mlp", Shape{1, c, h, w}, LossKind::cross_entropy);
  m->add<Flatten>().add<Linear>("1", c * h * w, 128).add<ReLU>().add<Linear>("3", 128, 10);
  return m;
}

std::unique_ptr<Model> make_convnet(int c, int h, int w) {
  auto m = std::make_unique<Model>("convnet", Shape{1, c, h, w}, LossKind::cross_entropy);
  m->add<Conv2d>("conv1", c, 32, 3, 1, 1).add<ReLU>().add<MaxPool2d>(2);
  m->add<Conv2d>("conv2", 32, 64, 3, 1, 1).add<ReLU>().add<MaxPool2d>(2).add<Flatten>();
  m->add<Linear>("fc1", 64 * (h / 2 / 2) * (w / 2 / 2), 128).add<ReLU>().add<Linear>("fc2", 128, 10);
  return m;
}

std::unique_ptr<Model> make_autoencoder(int c, int h, int w, int first) {
  auto m = std::make_unique<Model>("autoencoder", Shape{1, c, h, w}, LossKind::mse);
  m->add<Conv2d>("encoder.0", c, first, 3, 2, 1).add<ReLU>();
  m->add<Conv2d>("encoder.2", first, 32, 3, 2, 1).add<ReLU>();
  m->add<Conv2d>("encoder.4", 32, 64, 7);
  m->add<ConvTranspose2d>("decoder.0", 64, 32, 7).add<ReLU>();
  m->add<ConvTranspose2d>("decoder.2", 32, first, 3, 2, 1, 1).add<ReLU>();
  m->add<ConvTranspose2d>("decoder.4", first, c, 3, 2, 1, 1).add<Sigmoid>();
  return m;
}

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"net128", "mlp", "convnet", "autoencoder"};
  return names;
}

std::unique_ptr<Model> make_model(const std::string& name, int c, int h, int w) {
  std::unique_ptr<Model> m;
  if (name == "net128" || name == "net" || name == "lecture") m = c ? make_net(128, c, h, w) : make_net();
  else if (name == "mlp") m = c ? make_mlp(c, h, w) : make_mlp();
  else if (name == "convnet") m = c ? make_convnet(c, h, w) : make_convnet();
  else if (name == "autoencoder") m = c ? make_autoencoder(c, h, w) : make_autoencoder();
  else throw UsageError("--model '" + name + "': unknown model (expected net128, mlp, convnet or autoencoder)");
  // Validate the shapes once (a dataset too small for the model is bad input, not a crash).
  const Shape in = m->input_shape(1), out = m->output_shape(1);
  if (m->loss() == LossKind::mse && !(out.c() == in.c() && out.h() == in.h() && out.w() == in.w()))
    throw InputError(name + ": input " + in.str() + " reconstructs to " + out.str() + " (needs h, w multiples of 4, >= 28)");
  return m;
}

OptimizerConfig default_optimizer(const std::string& model) {
  OptimizerConfig c;
  if (model == "net128" || model == "net" || model == "lecture") {
    c.kind = "sgd", c.lr = 0.001f, c.momentum = 0.9f;
  } else {
    c.kind = "adam", c.lr = 0.001f;
  }
  return c;
}

}  // namespace dlb::models
