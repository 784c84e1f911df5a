//! `kplane-collector`: the collector service on its own (see `kplane collector` for the CLI form).

fn main() -> std::process::ExitCode {
    kplane_runtime::service_main_with_bus(kplane_collector::NAME, kplane_collector::run)
}
