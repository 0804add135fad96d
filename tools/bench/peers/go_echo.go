// The Go peer of the echo benchmark (README.md here): a goroutine per
// connection, each a read/write loop over a fixed 4096-byte buffer (what
// io.Copy does, without its interface lookups), on Go's own network poller.
//
// GOMAXPROCS is 1 unless the environment sets it: every other server in
// the benchmark runs on one CPU, and the driver pins each server to one, so
// Go's default (the CPUs the process may use) is 1 there anyway. The
// runtime's own threads (sysmon, idle Ms) are counted with the server.
//
// Standard library only; tools/bench/peers.sh builds it with GO111MODULE=off
// and GOPROXY=off, so nothing is ever downloaded.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"
)

const listenFd = 3

func main() {
	once, probe := false, false
	for _, arg := range os.Args[1:] {
		switch arg {
		case "--once":
			once = true
		case "--probe":
			probe = true
		default:
			fmt.Fprintf(os.Stderr, "usage: %s [--once] [--probe] (the listening socket is fd 3)\n", os.Args[0])
			os.Exit(2)
		}
	}
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if probe {
		fmt.Printf("NOTE go peer: %s, GOMAXPROCS %d, a goroutine per connection, read/write over a %d-byte buffer\n",
			runtime.Version(), runtime.GOMAXPROCS(0), 4096)
		return
	}
	ln, err := net.FileListener(os.NewFile(listenFd, "listener"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go_echo: %v\n", err)
		os.Exit(1)
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go_echo: accept: %v\n", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go echo(conn, once)
	}
}

// echo sends back what it reads until the peer closes (TCP_NODELAY is Go's default).
func echo(conn net.Conn, once bool) {
	buf := make([]byte, 4096)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	conn.Close()
	if once {
		os.Exit(0)
	}
}
