#pragma once
// A tensor's dimensions, outermost first (row-major, contiguous).

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace shardlm {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t axis) const { return dims_[axis]; }
  int64_t& operator[](size_t axis) { return dims_[axis]; }
  int64_t back() const { return dims_.back(); }
  const std::vector<int64_t>& dims() const { return dims_; }

  int64_t numel() const {
    int64_t count = 1;
    for (int64_t d : dims_) count *= d;
    return count;
  }
  bool operator==(const Shape& other) const = default;

  std::string to_string() const {
    std::string text = "[";
    for (size_t i = 0; i < dims_.size(); ++i) text += (i ? ", " : "") + std::to_string(dims_[i]);
    return text + "]";
  }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace shardlm
