//! `flashforward serve`: a local web page that streams video as it is made, a thin shell over
//! `ff_serve` (the routes, the queue, the page). The model is loaded once, on the CPU, before
//! the port opens; pages name prompts, never paths.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use ff_serve::{App, ServeConfig};
use flashforward::model::files::default_model_dir_in;
use flashforward::model::{Fallback, FileOverrides, Model};
use flashforward::{Cpu, Pipeline};

use crate::backend::cpu_device;

#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on; anything but a loopback address serves the page to the network.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Port (0: any free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Generations that run at once.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Generations that may wait for a worker; more are refused with 503.
    #[arg(long, default_value_t = 4)]
    queue: usize,
    /// The longest video a page may ask for, in seconds.
    #[arg(long, default_value_t = 60.0)]
    max_seconds: f64,
    #[command(flatten)]
    files: FileOverrides,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if !args.host.is_loopback() {
        eprintln!(
            "warning: --host {} serves the page and its generations to every machine that can reach this one; \
             the server has no authentication",
            args.host
        );
    }
    let fallback_dir = default_model_dir_in(|k| std::env::var(k).ok());
    let model = Model::open(args.files.resolve(Fallback::Default(&fallback_dir))?)?;
    eprintln!("loading {}", model.files.dit.display());
    let pipeline = Pipeline::<Cpu>::load_on(model, &[cpu_device()]).context("cannot load the model")?;
    let config = ServeConfig { workers: args.workers, queue: args.queue, max_seconds: args.max_seconds, ..Default::default() };
    let app = App::new(Arc::new(pipeline), config);
    ff_serve::run(SocketAddr::new(args.host, args.port), app, |addr| {
        eprintln!("serving on http://{addr}/ (Ctrl-C quits)");
    })?;
    Ok(ExitCode::SUCCESS)
}
