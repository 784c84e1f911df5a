//! `kplane-knowledge`: the knowledge service on its own (see `kplane knowledge` for the CLI form).

fn main() -> std::process::ExitCode {
    kplane_runtime::service_main_with_bus(kplane_knowledge::NAME, kplane_knowledge::run)
}
