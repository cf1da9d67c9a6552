//! `perfkit-load`: see the library crate for the engine.

fn main() {
    let code = perfkit_load::cli::main_with(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr());
    std::process::exit(code);
}
