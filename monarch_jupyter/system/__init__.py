"""This machine's processes and files: ``/proc`` and signal escalation (``procfs``), safe reads
and private writes (``files``), the records of live workers (``live``), of workers an apply left
behind (``orphans``) and of the user's actor procs (``actor_procs``), and the private-network
kernel (``private_net``, ``private_provisioner``)."""
