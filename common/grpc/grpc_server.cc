#include "common/grpc/grpc_server.h"

#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/grpc/grpc_parse_errors.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace tandem {

std::string HostPort(const std::string& host, int port) {
  return absl::StrFormat(host.find(':') != std::string::npos ? "[%s]:%d" : "%s:%d", host, port);
}

namespace {

// Plaintext, or TLS serving `tls`'s identity to clients that bring no
// certificate of their own (they authenticate with the API key).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsCredentials& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({tls.private_key(), tls.certificate_chain()});
  return grpc::SslServerCredentials(options);
}

}  // namespace

absl::StatusOr<GrpcServer> StartGrpcServer(const std::string& host, int port,
                                           const std::vector<grpc::Service*>& services,
                                           const std::vector<std::string>& health_names,
                                           const TlsCredentials& tls) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string listen = HostPort(host, port);
  builder.AddListeningPort(listen, ServerCredentials(tls), &bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<ParseErrorInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  GrpcServer out;
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot listen on %s%s", listen,
        tls.enabled() ? absl::StrFormat(" with TLS (--tls-cert '%s', --tls-key '%s')",
                                        tls.cert_file(), tls.key_file())
                      : ""));
  }
  grpc::HealthCheckServiceInterface* health = out.server->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const std::string& name : health_names) health->SetServingStatus(name, true);
  out.address = HostPort(host, bound_port);
  return out;
}

}  // namespace tandem
