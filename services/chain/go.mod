module rbl.dev/chain

go 1.23
