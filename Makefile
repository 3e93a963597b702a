# Shortcuts; dev.sh does the work (and needs nothing but bash on a fresh machine).
.PHONY: run test bench setup docker
run:
	./dev.sh run
test:
	./dev.sh test
bench:
	./dev.sh bench
setup:
	./dev.sh setup
docker:
	./dev.sh docker
