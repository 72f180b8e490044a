//! A token goes around every rank and back to rank 0, each rank adding one.
//!
//! `qcg run -n 8 --clusters 2 -- target/debug/examples/ring [ROUNDS]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let comm = qcg::init()?;
    let (rank, size) = (comm.rank(), comm.size());
    let rounds: u64 = std::env::args().nth(1).map_or(Ok(1), |s| s.parse())?;
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    for round in 0..rounds {
        if rank == 0 {
            // The token counts the ranks it has visited.
            comm.send(next, 0, &1u64.to_le_bytes())?;
        }
        let msg = comm.recv(Some(prev), Some(0))?;
        let token = u64::from_le_bytes(msg.data.as_slice().try_into()?);
        if rank == 0 {
            let expected = size as u64;
            if token != expected {
                return Err(format!("round {round}: token is {token}, expected {expected}").into());
            }
            println!("round {round}: token came back as {token} after visiting {size} ranks");
        } else {
            println!(
                "round {round}: rank {rank} on {} ({}) got {token} from {prev}",
                comm.node(),
                comm.cluster().name
            );
            comm.send(next, 0, &(token + 1).to_le_bytes())?;
        }
    }
    Ok(())
}
