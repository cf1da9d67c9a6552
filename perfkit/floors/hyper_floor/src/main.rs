use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let opts = match hyper_floor::parse_args(std::env::args().skip(1)) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{}", hyper_floor::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("hyper-floor: {msg}\n{}", hyper_floor::USAGE);
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hyper-floor: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&rt, async {
        let listener = hyper_floor::bind(&opts.host, opts.port)
            .await
            .map_err(|e| format!("cannot bind {}:{}: {e}", opts.host, opts.port))?;
        let stop = hyper_floor::termination().map_err(|e| format!("cannot install signal handlers: {e}"))?;
        let addr = hyper_floor::local_addr(&listener).map_err(|e| e.to_string())?;
        println!("listening on {}:{}", addr.ip(), addr.port());
        let _ = std::io::stdout().flush();
        let metrics = opts.metrics.then(|| std::rc::Rc::new(hyper_floor::FloorMetrics::new()));
        hyper_floor::serve_with(listener, stop, metrics)
            .await
            .map_err(|e| format!("accept failed: {e}"))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("hyper-floor: {msg}");
            ExitCode::FAILURE
        }
    }
}
