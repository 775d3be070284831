// ak::Arena slow paths: chunk changes, large allocations, destructor records, reset/rewind with
// marker validation, debug poisoning and stats. Chunk layout: [ArenaChunk header][bump space].
// Single-threaded by contract (arena.hpp).
#include "allockit/arena.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/core.hpp"

namespace ak {
namespace detail {

struct ArenaChunk {
  ArenaChunk* next;   // standard: next in use order; large: the previous large chunk
  std::size_t bytes;  // mapped size
  char* top;          // standard: where bumping stopped when the arena moved on; large: data end
  char* begin() noexcept { return reinterpret_cast<char*>(this) + kHeader; }
  char* end() noexcept { return reinterpret_cast<char*>(this) + bytes; }
  static constexpr std::size_t kHeader = 64;
};
static_assert(sizeof(ArenaChunk) <= ArenaChunk::kHeader);

}  // namespace detail

using detail::ArenaChunk;

bool arena_debug_default() noexcept {
  if (kDebugBuild) return true;
  const char* env = std::getenv("ALLOCKIT_ARENA_DEBUG");
  return env != nullptr && env[0] == '1' && env[1] == '\0';
}

Arena::Arena(ArenaOptions options)
    : limit_(options.limit),
      chunk_bytes_(options.chunk_bytes),
      pool_(options.pool ? options.pool : &default_chunk_pool()),
      name_(options.name),
      debug_(options.debug) {
  if (chunk_bytes_ < 4096 || chunk_bytes_ > (std::size_t(1) << 30))
    throw std::invalid_argument("ak::Arena: chunk_bytes must be between 4 KiB and 1 GiB");
}

Arena::~Arena() {
  run_dtors_until(nullptr);
  for (ArenaChunk* c = first_; c;) {
    ArenaChunk* next = c->next;
    return_chunk(c);
    c = next;
  }
  for (ArenaChunk* c = large_; c;) {
    ArenaChunk* next = c->next;
    return_chunk(c);
    c = next;
  }
}

void Arena::return_chunk(ArenaChunk* c) noexcept {
  detail::unpoison(c, c->bytes);  // the pool writes into cached chunks
  held_bytes_ -= c->bytes;
  pool_->release(c, c->bytes);
}

void Arena::fail(const char* what) const noexcept {
  detail::Message().str("allockit: arena '").str(name_).str("': ").str(what).fail();
}

void* Arena::allocate_or_throw(std::size_t size, std::size_t align) {
  if (void* p = allocate_slow(size, align)) return p;
  throw_failure(size, align);
}

void Arena::throw_failure(std::size_t, std::size_t align) const {
  if (!detail::is_pow2(align))
    throw std::invalid_argument("ak::Arena: alignment must be a power of two");
  throw std::bad_alloc();
}

// ---------------------------------------------------------------------------------------------
// Allocation slow paths
// ---------------------------------------------------------------------------------------------

void Arena::enter_chunk(ArenaChunk* c, std::size_t index, char* at) noexcept {
  current_ = c;
  current_index_ = index;
  pos_ = detail::addr(at);
  chunk_lim_ = detail::addr(c->end());
  lim_ = debug_ ? pos_ : chunk_lim_;
}

bool Arena::next_chunk() noexcept {
  if (current_ && current_->next) {
    current_->top = pos();
    enter_chunk(current_->next, current_index_ + 1, current_->next->begin());
    return true;
  }
  std::size_t bytes = chunk_bytes_;
  if (held_bytes_ + bytes > limit_) return false;
  void* mem = pool_->acquire(&bytes);
  if (mem == nullptr) return false;
  held_bytes_ += bytes;
  auto* c = ::new (mem) ArenaChunk{nullptr, bytes, nullptr};
  c->top = c->begin();
  if (debug_) detail::poison(c->begin(), bytes - ArenaChunk::kHeader);
  if (current_) {
    current_->top = pos();
    current_->next = c;
    enter_chunk(c, current_index_ + 1, c->begin());
  } else {
    first_ = c;
    enter_chunk(c, 0, c->begin());
  }
  return true;
}

void* Arena::allocate_large(std::size_t size, std::size_t align) noexcept {
  std::size_t bytes = ArenaChunk::kHeader + size + align;
  if (bytes < size || held_bytes_ + bytes > limit_ || held_bytes_ + bytes < held_bytes_)
    return nullptr;
  void* mem = pool_->acquire(&bytes);
  if (mem == nullptr) return nullptr;
  held_bytes_ += bytes;
  auto* c = ::new (mem) ArenaChunk{large_, bytes, nullptr};
  large_ = c;
  ++large_count_;
  char* p = reinterpret_cast<char*>(detail::align_up(detail::addr(c->begin()), align));
  c->top = p + size;
  return p;
}

void* Arena::allocate_slow(std::size_t size, std::size_t align) noexcept {
  if (!detail::is_pow2(align)) return nullptr;
  // A request above a quarter chunk gets a chunk of its own, leaving the standard size alone.
  if (size > chunk_bytes_ / 4 || align > chunk_bytes_ / 8) {
    void* p = allocate_large(size, align);
    if (p && debug_) detail::unpoison(p, size);
    return p;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (current_) {
      const std::uintptr_t p = detail::align_up(pos_, align);
      if (p <= chunk_lim_ && size <= chunk_lim_ - p) {
        pos_ = p + size;
        lim_ = debug_ ? pos_ : chunk_lim_;
        if (debug_) detail::unpoison(reinterpret_cast<void*>(p), size);
        return reinterpret_cast<void*>(p);
      }
    }
    if (!next_chunk()) return nullptr;
  }
  return nullptr;  // unreachable: a fresh chunk always holds a quarter-chunk request
}

bool Arena::grow_slow(char* p, std::size_t old_size, std::size_t new_size) noexcept {
  if (!debug_ || p + old_size != pos()) return false;
  if (new_size - old_size > chunk_lim_ - pos_) return false;
  detail::unpoison(pos(), new_size - old_size);
  pos_ = detail::addr(p + new_size);
  lim_ = pos_;
  return true;
}

std::string_view Arena::make_string(std::string_view s) {
  auto* out = static_cast<char*>(allocate(s.size() + 1, 1));
  if (!s.empty()) std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return {out, s.size()};
}

// ---------------------------------------------------------------------------------------------
// Destructors, reset, markers
// ---------------------------------------------------------------------------------------------

void Arena::push_dtor(detail::DtorRecord* rec, void* objects, std::size_t count,
                      void (*destroy)(void*, std::size_t)) noexcept {
  *rec = detail::DtorRecord{destroy, objects, count, dtors_};
  dtors_ = rec;
  ++dtor_count_;
}

void Arena::run_dtors_until(detail::DtorRecord* stop) noexcept {
  while (dtors_ && dtors_ != stop) {
    detail::DtorRecord* r = dtors_;
    dtors_ = r->prev;
    --dtor_count_;
    r->destroy(r->objects, r->count);
  }
}

void Arena::rewind_to(ArenaChunk* chunk, std::size_t index, char* at,
                      std::size_t large_count) noexcept {
  if (debug_ && current_) {
    for (ArenaChunk* c = chunk; c; c = c->next) {
      char* from = c == chunk ? at : c->begin();
      char* to = c == current_ ? pos() : c->top;
      if (to > from) detail::poison(from, std::size_t(to - from));
      if (c == current_) break;
    }
  }
  while (large_count_ > large_count) {
    ArenaChunk* c = large_;
    large_ = c->next;
    --large_count_;
    return_chunk(c);
  }
  if (chunk) {
    enter_chunk(chunk, index, at);
  } else {
    current_ = nullptr;
    pos_ = lim_ = chunk_lim_ = 0;
  }
}

void Arena::reset() noexcept {
  run_dtors_until(nullptr);
  rewind_to(first_, 0, first_ ? first_->begin() : nullptr, 0);
  ++epoch_;
}

ArenaMarker Arena::mark() const noexcept {
  ArenaMarker m;
  m.arena_ = this;
  m.epoch_ = epoch_;
  m.chunk_index_ = current_index_;
  m.ptr_ = current_ ? pos() : nullptr;
  m.dtors_ = dtors_;
  m.large_count_ = large_count_;
  return m;
}

void Arena::rewind(const ArenaMarker& m) noexcept {
  if (m.arena_ != this) fail("rewind to a marker from another arena");
  if (m.epoch_ != epoch_) fail("rewind to a marker invalidated by reset()");
  const bool ahead = m.chunk_index_ > current_index_ ||
                     (m.chunk_index_ == current_index_ && m.ptr_ > pos()) ||
                     m.large_count_ > large_count_ || (m.ptr_ && !current_);
  if (ahead) fail("rewind to a marker past the current position (invalidated by a rewind)");
  run_dtors_until(m.dtors_);
  if (m.ptr_ == nullptr) {  // marked before the first chunk
    rewind_to(first_, 0, first_ ? first_->begin() : nullptr, m.large_count_);
    return;
  }
  ArenaChunk* c = first_;
  for (std::size_t i = 0; i < m.chunk_index_; ++i) c = c->next;
  rewind_to(c, m.chunk_index_, m.ptr_, m.large_count_);
}

// ---------------------------------------------------------------------------------------------
// Queries
// ---------------------------------------------------------------------------------------------

bool Arena::owns(const void* p) const noexcept {
  auto* c = static_cast<const char*>(p);
  for (ArenaChunk* k = first_; k; k = k->next)
    if (c >= k->begin() && c < k->end()) return true;
  for (ArenaChunk* k = large_; k; k = k->next)
    if (c >= k->begin() && c < k->end()) return true;
  return false;
}

ArenaStats Arena::stats() const noexcept {
  ArenaStats s{0, held_bytes_, 0, 0, dtor_count_};
  bool before_current = current_ != nullptr;
  for (ArenaChunk* c = first_; c; c = c->next) {
    ++s.chunks;
    if (c == current_) {
      s.used_bytes += std::size_t(pos() - c->begin());
      before_current = false;
    } else if (before_current) {
      s.used_bytes += std::size_t(c->top - c->begin());
      s.waste_bytes += std::size_t(c->end() - c->top);
    }
  }
  for (ArenaChunk* c = large_; c; c = c->next) {
    ++s.chunks;
    s.used_bytes += std::size_t(c->top - c->begin());
  }
  return s;
}

}  // namespace ak
