// Asio's implementation, compiled once (ASIO_SEPARATE_COMPILATION).
#include <asio/impl/src.hpp>
#include <asio/ssl/impl/src.hpp>
