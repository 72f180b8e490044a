//! Every rank greets rank 0, which answers each one over the link the greeting came
//! on. Only ranks other than 0 ever look a peer up, and they all look up rank 0: the
//! frontal of each cluster asks the broker once and answers the rest from its cache.
//!
//! `qcg run -n 6 --clusters 2 -- target/debug/examples/fanin`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let comm = qcg::init()?;
    let (rank, size) = (comm.rank(), comm.size());
    if rank == 0 {
        for _ in 1..size {
            let m = comm.recv(None, Some(1))?;
            let reply = format!(
                "welcome, rank {} of {}",
                m.source,
                String::from_utf8_lossy(&m.data)
            );
            comm.send(m.source, 2, reply.as_bytes())?;
        }
        println!("rank 0 greeted {} ranks", size - 1);
    } else {
        comm.send(0, 1, comm.cluster().name.as_bytes())?;
        let m = comm.recv(Some(0), Some(2))?;
        let text = String::from_utf8(m.data)?;
        let expected = format!("welcome, rank {rank} of {}", comm.cluster().name);
        if text != expected {
            return Err(format!("rank 0 answered `{text}`, expected `{expected}`").into());
        }
        println!("{text}");
    }
    Ok(())
}
