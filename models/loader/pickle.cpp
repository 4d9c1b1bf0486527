// The pickle reader and writer (see pickle.h). Opcode values and argument layouts are those of
// CPython's Lib/pickletools.py; the numpy state tuples are numpy's ndarray.__reduce__ /
// dtype.__reduce__ output (array: version, shape, dtype, is_fortran, raw bytes; dtype: version,
// byte order, ...).
#include "models/loader/pickle.h"

#include <cstring>
#include <unordered_map>

#include "kernels/common/errors.h"

namespace dlb::models::loader {

namespace {

class Machine {
 public:
  Machine(const std::string& b, const std::string& what) : b_(b), what_(what) {}

  Unpickled run() {
    for (;;) {
      op_at_ = at_;
      const unsigned char op = byte();
      switch (op) {
        case 0x80: {  // PROTO
          const unsigned v = byte();
          if (v < 2 || v > 5) fail("pickle protocol " + std::to_string(v) + " (expected 2 to 5)");
          break;
        }
        case 0x95: take(8); break;  // FRAME: a size hint
        case '(': marks_.push_back(stack_.size()); break;
        case '.': {  // STOP
          r_.root = pop();
          return std::move(r_);
        }
        case '}': push(make(PyObj::dict)); break;
        case ']': push(make(PyObj::list)); break;
        case ')': push(make(PyObj::tuple)); break;
        case 'd': push(collect(PyObj::dict)); break;
        case 'l': push(collect(PyObj::list)); break;
        case 't': push(collect(PyObj::tuple)); break;
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          const std::size_t n = op - 0x84u;
          need(n);
          const std::uint32_t t = make(PyObj::tuple);
          r_.objs[t].items.assign(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          push(t);
          break;
        }
        case 'q': memo_[byte()] = top(); break;       // BINPUT
        case 'r': memo_[u32()] = top(); break;        // LONG_BINPUT
        case 0x94: { const auto n = static_cast<std::uint32_t>(memo_.size()); memo_[n] = top(); break; }  // MEMOIZE
        case 'h': push(get(byte())); break;            // BINGET
        case 'j': push(get(u32())); break;             // LONG_BINGET
        case 'U': text(byte(), true); break;           // SHORT_BINSTRING (Python 2 str)
        case 'T': text(len32s(), true); break;         // BINSTRING
        case 0x8c: text(byte(), false); break;         // SHORT_BINUNICODE
        case 'X': text(u32(), false); break;           // BINUNICODE
        case 0x8d: text(u64(), false); break;          // BINUNICODE8
        case 'C': raw(byte()); break;                  // SHORT_BINBYTES
        case 'B': raw(u32()); break;                   // BINBYTES
        case 0x8e: case 0x96: raw(u64()); break;       // BINBYTES8, BYTEARRAY8
        case 'K': integer(byte()); break;              // BININT1
        case 'M': { const std::int64_t lo = byte(); integer(lo | std::int64_t(byte()) << 8); break; }  // BININT2
        case 'J': integer(static_cast<std::int32_t>(u32())); break;  // BININT
        case 0x8a: long_int(byte()); break;            // LONG1
        case 0x8b: long_int(u32()); break;             // LONG4
        case 'N': push(make(PyObj::none)); break;
        case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
          const std::uint32_t o = make(PyObj::boolean);
          r_.objs[o].i = op == 0x88;
          push(o);
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          std::uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = bits << 8 | byte();
          const std::uint32_t o = make(PyObj::floating);
          std::memcpy(&r_.objs[o].f, &bits, 8);
          push(o);
          break;
        }
        case 'c': {  // GLOBAL module\nname\n
          const std::string mod = line(), name = line();
          global(mod + "." + name);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const std::uint32_t name = pop(), mod = pop();
          if (r_.objs[name].kind != PyObj::str || r_.objs[mod].kind != PyObj::str) fail("STACK_GLOBAL of a non-string");
          global(r_.objs[mod].s + "." + r_.objs[name].s);
          break;
        }
        case 'R': { const std::uint32_t args = pop(), fn = pop(); push(reduce(fn, args)); break; }
        case 'b': { const std::uint32_t state = pop(); build(top(), state); break; }
        case 'a': { const std::uint32_t v = pop(); append(top(), v); break; }
        case 'e': {  // APPENDS
          const std::size_t m = mark();
          if (m == 0) fail("APPENDS without a list");
          for (std::size_t k = m; k < stack_.size(); ++k) append(stack_[m - 1], stack_[k]);
          stack_.resize(m);
          break;
        }
        case 's': { const std::uint32_t v = pop(), k = pop(); setitem(top(), k, v); break; }
        case 'u': {  // SETITEMS
          const std::size_t m = mark();
          if (m == 0 || (stack_.size() - m) % 2) fail("SETITEMS without a dict or with an odd item count");
          for (std::size_t k = m; k < stack_.size(); k += 2) setitem(stack_[m - 1], stack_[k], stack_[k + 1]);
          stack_.resize(m);
          break;
        }
        case '0': pop(); break;                               // POP
        case '1': stack_.resize(mark()); break;               // POP_MARK
        case '2': push(top()); break;                         // DUP
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("unsupported pickle opcode ") + hex + " (not a CIFAR-10 python batch)");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(what_ + ": " + why + " at byte " + std::to_string(op_at_));
  }
  const char* take(std::uint64_t n) {
    if (n > b_.size() - at_) fail("truncated (the pickle ends inside an opcode's argument)");
    const char* p = b_.data() + at_;
    at_ += n;
    return p;
  }
  unsigned byte() { return static_cast<unsigned char>(*take(1)); }
  std::uint32_t u32() {
    const auto* p = reinterpret_cast<const unsigned char*>(take(4));
    return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
  }
  std::uint64_t u64() { const std::uint64_t lo = u32(); return lo | std::uint64_t(u32()) << 32; }
  std::uint64_t len32s() {
    const auto n = static_cast<std::int32_t>(u32());
    if (n < 0) fail("negative string length");
    return static_cast<std::uint64_t>(n);
  }
  std::string line() {
    const std::size_t nl = b_.find('\n', at_);
    if (nl == std::string::npos || nl - at_ > 256) fail("GLOBAL without a short name line");
    std::string s = b_.substr(at_, nl - at_);
    at_ = nl + 1;
    return s;
  }

  std::uint32_t make(PyObj::Kind k) {
    r_.objs.emplace_back();
    r_.objs.back().kind = k;
    return static_cast<std::uint32_t>(r_.objs.size() - 1);
  }
  void push(std::uint32_t o) { stack_.push_back(o); }
  void need(std::size_t n) const {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail("stack underflow");
  }
  std::uint32_t top() const {
    need(1);
    return stack_.back();
  }
  std::uint32_t pop() {
    need(1);
    const std::uint32_t o = stack_.back();
    stack_.pop_back();
    return o;
  }
  std::size_t mark() {
    if (marks_.empty()) fail("no MARK");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  std::uint32_t collect(PyObj::Kind k) {
    const std::size_t m = mark();
    const std::uint32_t o = make(k);
    if (k == PyObj::dict && (stack_.size() - m) % 2) fail("DICT with an odd item count");
    r_.objs[o].items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return o;
  }
  std::uint32_t get(std::uint32_t k) const {
    const auto it = memo_.find(k);
    if (it == memo_.end()) fail("memo " + std::to_string(k) + " was never stored");
    return it->second;
  }
  void text(std::uint64_t n, bool py2) {
    const char* p = take(n);
    const std::uint32_t o = make(PyObj::str);
    r_.objs[o].s.assign(p, n);
    r_.objs[o].i = py2;  // 1: a Python 2 str, one byte per latin-1 character
    push(o);
  }
  void raw(std::uint64_t n) {
    const char* p = take(n);
    const std::uint32_t o = make(PyObj::bytes);
    r_.objs[o].s.assign(p, n);
    push(o);
  }
  void integer(std::int64_t v) {
    const std::uint32_t o = make(PyObj::integer);
    r_.objs[o].i = v;
    push(o);
  }
  void long_int(std::uint64_t n) {
    if (n > 8) fail("integer of " + std::to_string(n) + " bytes (at most 8 expected)");
    const auto* p = reinterpret_cast<const unsigned char*>(take(n));
    std::uint64_t v = 0;
    for (std::uint64_t k = 0; k < n; ++k) v |= std::uint64_t(p[k]) << (8 * k);
    if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~std::uint64_t(0) << (8 * n);  // sign-extend
    integer(static_cast<std::int64_t>(v));
  }
  void global(const std::string& name) {
    static const char* const known[] = {"numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
                                        "numpy.ndarray", "numpy.dtype", "_codecs.encode",
                                        "numpy.core.numeric._frombuffer", "numpy._core.numeric._frombuffer"};
    for (const char* k : known)
      if (name == k) {
        const std::uint32_t o = make(PyObj::global);
        r_.objs[o].s = name;
        push(o);
        return;
      }
    fail("refers to " + name + ", which a CIFAR-10 python batch does not (only numpy arrays are read)");
  }
  const PyObj& tuple_arg(std::uint32_t args, std::size_t n, const char* fn) const {
    const PyObj& t = r_.objs[args];
    if (t.kind != PyObj::tuple || t.items.size() < n) fail(std::string("bad arguments to ") + fn);
    return t;
  }
  // Bytes of a str given where numpy wants raw data: a Python 2 str as it is, a unicode str as
  // latin-1 (what _codecs.encode(s, "latin1") gives, and what numpy does with pickled Python 2 data).
  std::string latin1(const PyObj& s) const {
    if (s.kind == PyObj::bytes || (s.kind == PyObj::str && s.i == 1)) return s.s;
    if (s.kind != PyObj::str) fail("raw array data is neither bytes nor a string");
    std::string out;
    out.reserve(s.s.size());
    for (std::size_t k = 0; k < s.s.size(); ++k) {
      const auto c = static_cast<unsigned char>(s.s[k]);
      if (c < 0x80) out += static_cast<char>(c);
      else if ((c == 0xC2 || c == 0xC3) && k + 1 < s.s.size()) out += static_cast<char>(((c & 0x03) << 6) | (s.s[++k] & 0x3F));
      else fail("a string outside latin-1 where raw bytes were expected");
    }
    return out;
  }
  std::uint32_t reduce(std::uint32_t fn, std::uint32_t args) {
    const PyObj& f = r_.objs[fn];
    if (f.kind != PyObj::global) fail("REDUCE of something not callable");
    const std::string& name = f.s;
    if (name.find("_reconstruct") != std::string::npos) {
      tuple_arg(args, 3, "_reconstruct");
      const std::uint32_t o = make(PyObj::ndarray);
      r_.objs[o].dtype = "";  // set by BUILD
      return o;
    }
    if (name == "numpy.dtype") {
      const PyObj& t = tuple_arg(args, 1, "numpy.dtype");
      const PyObj& type = r_.objs[t.items[0]];
      if (type.kind != PyObj::str || type.s.size() > 8) fail("numpy.dtype of a non-string");
      const std::string s = type.s;
      const std::uint32_t o = make(PyObj::dtype_obj);
      r_.objs[o].s = "=" + s;  // native order until BUILD says
      return o;
    }
    if (name == "_codecs.encode") {
      const PyObj& t = tuple_arg(args, 2, "_codecs.encode");
      const PyObj& enc = r_.objs[t.items[1]];
      if (enc.kind != PyObj::str || (enc.s != "latin1" && enc.s != "latin-1" && enc.s != "iso-8859-1"))
        fail("_codecs.encode to an encoding other than latin-1");
      std::string b = latin1(r_.objs[t.items[0]]);
      const std::uint32_t o = make(PyObj::bytes);
      r_.objs[o].s = std::move(b);
      return o;
    }
    if (name.find("_frombuffer") != std::string::npos) {  // (buffer, dtype, shape, order)
      const PyObj& t = tuple_arg(args, 4, "_frombuffer");
      const std::uint32_t buf = t.items[0], dt = t.items[1], shape = t.items[2], order = t.items[3];
      const std::uint32_t o = make(PyObj::ndarray);
      fill_array(o, shape, dt, r_.objs[order].kind == PyObj::str && r_.objs[order].s == "F", buf);
      return o;
    }
    fail("cannot call " + name);
  }
  void fill_array(std::uint32_t o, std::uint32_t shape, std::uint32_t dt, bool fortran, std::uint32_t data) {
    const PyObj& sh = r_.objs[shape];
    const PyObj& d = r_.objs[dt];
    if (sh.kind != PyObj::tuple || sh.items.size() > 4) fail("array shape is not a short tuple");
    if (d.kind != PyObj::dtype_obj) fail("array dtype is not a numpy.dtype");
    std::vector<std::int64_t> dims;
    std::uint64_t count = 1;
    for (std::uint32_t k : sh.items) {
      const PyObj& n = r_.objs[k];
      if (n.kind != PyObj::integer || n.i < 0 || n.i > (std::int64_t(1) << 40)) fail("bad array dimension");
      dims.push_back(n.i);
      count *= static_cast<std::uint64_t>(n.i);
      if (count > (std::uint64_t(1) << 40)) fail("array too large");
    }
    if (fortran && dims.size() > 1) fail("Fortran-ordered array (CIFAR-10 batches are C-ordered)");
    const std::size_t item = std::strtoul(d.s.c_str() + 2, nullptr, 10);
    if (item == 0 || item > 8) fail("array of dtype " + d.s + " (expected 1 to 8-byte numbers)");
    std::string bytes = latin1(r_.objs[data]);
    if (bytes.size() != count * item)
      fail("array data of " + std::to_string(bytes.size()) + " bytes for a shape of " + std::to_string(count) + " x " +
           std::to_string(item) + " bytes");
    PyObj& a = r_.objs[o];
    a.kind = PyObj::ndarray;
    a.shape = std::move(dims);
    a.dtype = d.s;
    a.s = std::move(bytes);
  }
  void build(std::uint32_t obj, std::uint32_t state) {
    PyObj& o = r_.objs[obj];
    const PyObj& st = r_.objs[state];
    if (st.kind != PyObj::tuple) fail("BUILD with a state that is not a tuple");
    if (o.kind == PyObj::dtype_obj) {  // (version, byte order, ...)
      if (st.items.size() < 2 || r_.objs[st.items[1]].kind != PyObj::str || r_.objs[st.items[1]].s.size() != 1)
        fail("numpy.dtype state without a byte order");
      o.s[0] = r_.objs[st.items[1]].s[0];
      return;
    }
    if (o.kind == PyObj::ndarray && o.dtype.empty()) {  // ([version,] shape, dtype, is_fortran, raw)
      const std::size_t k = st.items.size() == 5 ? 1 : 0;
      if (st.items.size() != 4 + k) fail("ndarray state of " + std::to_string(st.items.size()) + " items");
      const PyObj& fortran = r_.objs[st.items[k + 2]];
      fill_array(obj, st.items[k], st.items[k + 1], (fortran.kind == PyObj::boolean || fortran.kind == PyObj::integer) && fortran.i,
                 st.items[k + 3]);
      return;
    }
    fail("BUILD of an object that is neither a numpy array nor a dtype");
  }
  void append(std::uint32_t list, std::uint32_t v) {
    if (r_.objs[list].kind != PyObj::list) fail("APPEND to something not a list");
    r_.objs[list].items.push_back(v);
  }
  void setitem(std::uint32_t dict, std::uint32_t k, std::uint32_t v) {
    if (r_.objs[dict].kind != PyObj::dict) fail("SETITEM on something not a dict");
    r_.objs[dict].items.push_back(k);
    r_.objs[dict].items.push_back(v);
  }

  const std::string& b_;
  const std::string& what_;
  std::size_t at_ = 0, op_at_ = 0;
  Unpickled r_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, std::uint32_t> memo_;
};

}  // namespace

const PyObj* Unpickled::get(const PyObj& dict, const std::string& key) const {
  if (dict.kind != PyObj::dict) return nullptr;
  const PyObj* found = nullptr;
  for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {  // the last of equal keys wins, as in Python
    const PyObj& kk = objs[dict.items[k]];
    if ((kk.kind == PyObj::str || kk.kind == PyObj::bytes) && kk.s == key) found = &objs[dict.items[k + 1]];
  }
  return found;
}

Unpickled unpickle(const std::string& bytes, const std::string& what) { return Machine(bytes, what).run(); }

// ---- writer ----

PickleWriter::PickleWriter() {
  out_ = "\x80\x02}";  // PROTO 2, EMPTY_DICT
  put();
  out_ += '(';
}

void PickleWriter::put() {
  if (memo_ < 256) {
    out_ += 'q';
    out_ += static_cast<char>(memo_);
  } else {
    out_ += 'r';
    for (int k = 0; k < 4; ++k) out_ += static_cast<char>((memo_ >> (8 * k)) & 0xFF);
  }
  ++memo_;
}

void PickleWriter::int_op(std::int64_t v) {
  if (v >= 0 && v < 256) {
    out_ += 'K';
    out_ += static_cast<char>(v);
  } else if (v >= 0 && v < 65536) {
    out_ += 'M';
    out_ += static_cast<char>(v & 0xFF);
    out_ += static_cast<char>(v >> 8);
  } else {
    const auto u = static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
    out_ += 'J';
    for (int k = 0; k < 4; ++k) out_ += static_cast<char>((u >> (8 * k)) & 0xFF);
  }
}

void PickleWriter::key(const std::string& k) { str(k); }

void PickleWriter::str(const std::string& s) {
  if (s.size() < 256) {
    out_ += 'U';
    out_ += static_cast<char>(s.size());
  } else {
    out_ += 'T';
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int k = 0; k < 4; ++k) out_ += static_cast<char>((n >> (8 * k)) & 0xFF);
  }
  out_ += s;
  put();
}

void PickleWriter::integer(std::int64_t v) { int_op(v); }

void PickleWriter::int_list(const std::vector<std::int32_t>& v) {
  out_ += ']';
  put();
  if (v.empty()) return;
  out_ += '(';
  for (std::int32_t x : v) int_op(x);
  out_ += 'e';
}

void PickleWriter::str_list(const std::vector<std::string>& v) {
  out_ += ']';
  put();
  if (v.empty()) return;
  out_ += '(';
  for (const auto& s : v) str(s);
  out_ += 'e';
}

void PickleWriter::u8_matrix(const std::uint8_t* p, std::size_t rows, std::size_t cols) {
  out_ += "cnumpy.core.multiarray\n_reconstruct\n";
  put();
  out_ += "cnumpy\nndarray\n";
  put();
  static const char kArgs[] = {'K', 0, '\x85', 'U', 1, 'b', '\x87', 'R'};  // (ndarray, (0,), "b"), REDUCE
  out_.append(kArgs, sizeof kArgs);
  put();
  out_ += '(';
  int_op(1);  // state version
  int_op(static_cast<std::int64_t>(rows));
  int_op(static_cast<std::int64_t>(cols));
  out_ += '\x86';  // TUPLE2: the shape
  out_ += "cnumpy\ndtype\n";
  put();
  out_ += "U\x02u1";
  int_op(0);
  int_op(1);
  out_ += "\x87R";  // dtype("u1", 0, 1)
  put();
  out_ += '(';
  int_op(3);
  out_ += "U\x01|NNN";
  out_ += "J\xff\xff\xff\xffJ\xff\xff\xff\xff";
  int_op(0);
  out_ += "tb";  // the dtype's state, BUILD
  out_ += '\x89';  // is_fortran False
  str(std::string(reinterpret_cast<const char*>(p), rows * cols));
  out_ += "tb";  // the array's state, BUILD
}

std::string PickleWriter::finish() {
  out_ += "u.";  // SETITEMS, STOP
  return std::move(out_);
}

}  // namespace dlb::models::loader
