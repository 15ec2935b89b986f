// Status propagation macros used by every module (DESIGN.md "Errors").
#ifndef TANDEM_COMMON_STATUS_MACROS_H_
#define TANDEM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TANDEM_CONCAT_INNER_(a, b) a##b
#define TANDEM_CONCAT_(a, b) TANDEM_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                           \
  do {                                                  \
    ::absl::Status tandem_status_ = (expr);             \
    if (!tandem_status_.ok()) return tandem_status_;    \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo());` assigns the value of an absl::StatusOr or
// returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(TANDEM_CONCAT_(tandem_statusor_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // TANDEM_COMMON_STATUS_MACROS_H_
