# permitd in a container: built from this tree on Debian 12, run from a slim
# image with only the shared libraries it links.
#
# Stages: `build` compiles permitd from exactly the paths it COPYs (every
# folder the binary embeds among them: tests/integration/test_docker.py
# builds from those same paths and checks the result serves the admin UI);
# `seed` is the one-shot step of docker-compose.yml that adds the example
# policy and a first admin user, as scripts/run.sh does; the last stage is
# the server itself (the default target).
FROM debian:12 AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      protobuf-c-compiler libprotobuf-c-dev libmicrohttpd-dev libhiredis-dev \
      libjansson-dev zlib1g-dev libmariadb-dev libargon2-dev nettle-dev libnghttp2-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY proto proto
COPY lua lua
COPY migrations migrations
COPY admin-ui admin-ui
COPY server server
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
 && cmake --build build -j "$(nproc)"

FROM debian:12-slim AS base
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmicrohttpd12 libhiredis0.14 \
      libprotobuf-c1 libjansson4 zlib1g libmariadb3 libargon2-1 libnettle8 libnghttp2-14 curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --no-create-home permitd
COPY --from=build /src/build/server/permitd /usr/local/bin/permitd

# docker/seed.sh needs the stock MySQL client for its two counts and the
# example policy; the server image goes without it.
FROM base AS seed
RUN apt-get update \
 && apt-get install -y --no-install-recommends mariadb-client-core \
 && rm -rf /var/lib/apt/lists/*
COPY docker/seed.sh /usr/local/bin/permitd-seed
USER permitd
ENTRYPOINT ["/usr/local/bin/permitd-seed"]

FROM base AS permitd
USER permitd
EXPOSE 8080 8081
ENV PERMITD_LISTEN=0.0.0.0:8080 PERMITD_ADMIN_LISTEN=0.0.0.0:8081
ENTRYPOINT ["/usr/local/bin/permitd"]
