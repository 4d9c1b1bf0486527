// Python's pickle format, the part CIFAR-10's python batches use (data_batch_1..5, test_batch,
// batches.meta, as torchvision's CIFAR10 reads them): a reader for protocols 2-5 (Python 2's cPickle
// str, Python 3's unicode/bytes/frames, numpy arrays by _reconstruct + __setstate__ or, protocol 5,
// _frombuffer) and a writer of the protocol-2 form the real files have. Nothing is executed: only
// the numpy and _codecs globals these files name are understood, anything else is refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::models::loader {

// One value of the unpickled tree. Objects live in Unpickled::objs and refer to each other by index,
// so a hostile file's cycles or depth cost nothing to hold or free.
struct PyObj {
  enum Kind { none, boolean, integer, floating, str, bytes, list, tuple, dict, global, dtype_obj, ndarray };
  Kind kind = none;
  std::int64_t i = 0;         // boolean, integer
  double f = 0;               // floating
  std::string s;              // str (UTF-8), bytes, global ("module.name"), dtype ("|u1"), ndarray data
  std::vector<std::uint32_t> items;  // list, tuple; dict: key, value, key, value ...
  std::vector<std::int64_t> shape;   // ndarray
  std::string dtype;                 // ndarray: "|u1", "<i8" ...
};

struct Unpickled {
  std::vector<PyObj> objs;
  std::uint32_t root = 0;
  const PyObj& at(std::uint32_t i) const { return objs[i]; }
  // dict lookup by str key (also a Python 2 str, read as latin-1); null when absent or not a dict
  const PyObj* get(const PyObj& dict, const std::string& key) const;
};

// Parses `bytes`; throws dlb::InputError("<what>: ...") naming the offset and opcode of what it
// cannot read (truncated, unknown opcode, foreign global).
Unpickled unpickle(const std::string& bytes, const std::string& what);

// Writer of the CIFAR-10 python batch form (Python 2 cPickle, protocol 2): a dict whose str keys map
// to a uint8 ndarray (n x row), a list of ints, a str, or a list of strs; what Python 3 reads with
// pickle.load(f, encoding="latin1") as torchvision does.
class PickleWriter {
 public:
  PickleWriter();                       // PROTO 2, an empty dict, MARK
  void key(const std::string& k);       // then one value:
  void u8_matrix(const std::uint8_t* p, std::size_t rows, std::size_t cols);
  void int_list(const std::vector<std::int32_t>& v);
  void str(const std::string& s);
  void str_list(const std::vector<std::string>& v);
  void integer(std::int64_t v);
  std::string finish();                 // SETITEMS, STOP: the file's bytes

 private:
  void put();  // BINPUT / LONG_BINPUT the next memo slot, as cPickle does
  void int_op(std::int64_t v);
  std::string out_;
  std::uint32_t memo_ = 1;
};

}  // namespace dlb::models::loader
