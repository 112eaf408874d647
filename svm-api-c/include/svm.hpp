// svm.hpp: a header-only C++17 layer over svm.h (libsvm.so). Reference: docs/c-api.md.
//
//   c++ -std=c++17 $(pkg-config --cflags svm) prog.cpp $(pkg-config --libs svm) -o prog
//
// Every failure of the C API becomes an svm::error carrying the error code (code()) and the
// runtime's message (what()). Regions and locks are RAII types; svm::shared_array<T> is a
// typed view of shared memory with operator[].
#ifndef SVM_HPP
#define SVM_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "svm.h"

namespace svm {

/// A failed svm call: code() is the SVM_E_* code.
class error : public std::runtime_error {
  public:
    error(int code, const std::string &what) : std::runtime_error(what), code_(code) {}
    int code() const noexcept { return code_; }

  private:
    int code_;
};

/// Throws svm::error for a non-zero code of the C API.
inline void check(int rc) {
    if (rc != SVM_OK) {
        const char *msg = svm_last_error();
        throw error(rc, std::string(svm_strerror(rc)) + ((msg && *msg) ? std::string(": ") + msg : ""));
    }
}

/// The runtime: svm_init in the constructor, svm_finish in finish() or the destructor.
class runtime {
  public:
    runtime() { check(svm_init()); }
    ~runtime() {
        if (!done_)
            svm_finish(); // a destructor cannot throw: call finish() to see errors
    }
    runtime(const runtime &) = delete;
    runtime &operator=(const runtime &) = delete;
    void finish() {
        done_ = true;
        check(svm_finish());
    }

  private:
    bool done_ = false;
};

/// The profiler switches, before the runtime starts (see svm.h).
inline void set_profile(const char *file) { check(svm_set_profile(file)); }
inline void set_trace(const char *file) { check(svm_set_trace(file)); }

inline int node_id() {
    int v;
    check(svm_node_id(&v));
    return v;
}
inline int nodes() {
    int v;
    check(svm_nodes(&v));
    return v;
}
inline std::size_t page_size() {
    std::size_t v;
    check(svm_page_size(&v));
    return v;
}
inline void barrier() { check(svm_barrier()); }
inline void barrier(std::uint64_t id, unsigned count) { check(svm_barrier_id(id, count)); }

/// A home policy (svm_home_t) owning its lists.
class home {
  public:
    static home node(int n) { return home(SVM_HOME_NODE, n); }
    static home block() { return home(SVM_HOME_BLOCK); }
    static home cyclic() { return home(SVM_HOME_CYCLIC); }
    static home first_touch() { return home(SVM_HOME_FIRST_TOUCH); }
    static home custom(std::vector<int> nodes) {
        home h(SVM_HOME_CUSTOM);
        h.nodes_ = std::move(nodes);
        return h;
    }
    /// Runs of (node, pages).
    static home runs(const std::vector<std::pair<int, std::uint64_t>> &runs) {
        home h(SVM_HOME_RUNS);
        for (auto &r : runs) {
            h.nodes_.push_back(r.first);
            h.pages_.push_back(r.second);
        }
        return h;
    }
    svm_home_t c() const {
        svm_home_t h{kind_, node_, nodes_.empty() ? nullptr : nodes_.data(),
                     pages_.empty() ? nullptr : pages_.data(), nodes_.size()};
        return h;
    }

  private:
    explicit home(int kind, int node = 0) : kind_(kind), node_(node) {}
    int kind_;
    int node_;
    std::vector<int> nodes_;
    std::vector<std::uint64_t> pages_;
};

/// A typed view of `size` elements of shared memory (no ownership).
template <typename T> class shared_array {
    static_assert(std::is_trivially_copyable<T>::value,
                  "shared memory holds trivially copyable types only");

  public:
    shared_array() = default;
    shared_array(T *data, std::size_t size) : data_(data), size_(size) {}
    T &operator[](std::size_t i) const { return data_[i]; }
    /// Bounds-checked access (throws std::out_of_range).
    T &at(std::size_t i) const {
        if (i >= size_)
            throw std::out_of_range("svm::shared_array index " + std::to_string(i) +
                                    " out of range " + std::to_string(size_));
        return data_[i];
    }
    T *data() const { return data_; }
    std::size_t size() const { return size_; }
    T *begin() const { return data_; }
    T *end() const { return data_ + size_; }

  private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
};

/// A region (collective): created in the constructor, destroyed in destroy() or the
/// destructor. Movable, not copyable.
class region {
  public:
    explicit region(std::size_t bytes, svm_protocol_t protocol = SVM_PROTOCOL_DEFAULT,
                    const home &h = home::node(0)) {
        svm_home_t ch = h.c();
        check(svm_region_create(bytes, protocol, &ch, &id_));
    }
    region(std::size_t bytes, const std::string &protocol, const home &h = home::node(0)) {
        svm_home_t ch = h.c();
        check(svm_region_create_named(bytes, protocol.c_str(), &ch, &id_));
    }
    region(region &&o) noexcept : id_(o.id_) { o.id_ = 0; }
    region &operator=(region &&o) noexcept {
        if (this != &o) {
            if (id_)
                svm_region_destroy(id_);
            id_ = o.id_;
            o.id_ = 0;
        }
        return *this;
    }
    region(const region &) = delete;
    region &operator=(const region &) = delete;
    ~region() {
        if (id_)
            svm_region_destroy(id_); // a destructor cannot throw: call destroy() to see errors
    }
    /// Collective destroy, reporting errors.
    void destroy() {
        svm_region_t id = id_;
        id_ = 0;
        check(svm_region_destroy(id));
    }
    svm_region_t id() const { return id_; }
    void *addr() const {
        void *p;
        check(svm_region_addr(id_, &p));
        return p;
    }
    std::size_t size() const {
        std::size_t s;
        check(svm_region_size(id_, &s));
        return s;
    }
    /// The whole region as an array of T.
    template <typename T> shared_array<T> as_array() const {
        return shared_array<T>(static_cast<T *>(addr()), size() / sizeof(T));
    }
    /// Collective allocation of `n` elements of T inside the region.
    template <typename T> shared_array<T> alloc(std::size_t n) {
        void *p;
        check(svm_region_alloc(id_, n * sizeof(T), &p));
        return shared_array<T>(static_cast<T *>(p), n);
    }
    template <typename T> void free(shared_array<T> a) { check(svm_region_free(id_, a.data())); }

  private:
    svm_region_t id_ = 0;
};

/// A job-wide mutex named by an id; satisfies the standard Lockable requirements.
class mutex {
  public:
    explicit constexpr mutex(std::uint64_t id) : id_(id) {}
    void lock() { check(svm_lock(id_)); }
    bool try_lock() {
        int got;
        check(svm_trylock(id_, &got));
        return got != 0;
    }
    void unlock() { check(svm_unlock(id_)); }
    std::uint64_t id() const { return id_; }

  private:
    std::uint64_t id_;
};

/// Holds an svm::mutex for a scope.
class lock_guard {
  public:
    explicit lock_guard(mutex &m) : m_(m) { m_.lock(); }
    ~lock_guard() { svm_unlock(m_.id()); } // a destructor cannot throw
    lock_guard(const lock_guard &) = delete;
    lock_guard &operator=(const lock_guard &) = delete;

  private:
    mutex &m_;
};

/// A job-wide counting semaphore named by an id (initially 0).
class semaphore {
  public:
    explicit constexpr semaphore(std::uint64_t id) : id_(id) {}
    void post() { check(svm_sem_post(id_)); }
    void wait() { check(svm_sem_wait(id_)); }

  private:
    std::uint64_t id_;
};

/// This node's statistics.
inline svm_stats_t stats() {
    svm_stats_t s;
    check(svm_stats(&s));
    return s;
}

/// This node's statistics as one line of JSON.
inline std::string stats_json() {
    std::size_t len = 0;
    int rc = svm_stats_json(nullptr, 0, &len);
    if (rc != SVM_E_TRUNC)
        check(rc);
    std::string s(len + 1, '\0');
    check(svm_stats_json(&s[0], s.size(), &len));
    s.resize(len);
    return s;
}

} // namespace svm

#endif // SVM_HPP
