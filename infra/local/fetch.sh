#!/usr/bin/env bash
# Fetches Kafka's jars and the Apicurio registry from Maven Central into .local/ (once).
source "$(dirname "$0")/lib.sh"

command -v java >/dev/null || die "java not found: install OpenJDK 17 (apt-get install openjdk-17-jre-headless)"
command -v mvn >/dev/null || die "mvn not found: install Maven (apt-get install maven)"

if [ ! -f "$KAFKA_LIBS/.complete-$KAFKA_VERSION" ]; then
  log "fetching Apache Kafka $KAFKA_VERSION jars from Maven Central"
  rm -rf "$KAFKA_LIBS"
  mvn -q -B -f "$ROOT_DIR/infra/local/kafka-pom.xml" dependency:copy-dependencies \
    -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS" >&2 \
    || die "Maven could not fetch Kafka $KAFKA_VERSION (see the output above)"
  touch "$KAFKA_LIBS/.complete-$KAFKA_VERSION"
fi

app=$APICURIO_DIR/apicurio-registry-app-$APICURIO_VERSION
if [ ! -f "$app/.complete" ]; then
  log "fetching Apicurio Registry $APICURIO_VERSION from Maven Central"
  rm -rf "$app" && mkdir -p "$app"
  mvn -q -B dependency:copy -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" \
    -DoutputDirectory="$APICURIO_DIR" >&2 \
    || die "Maven could not fetch Apicurio Registry $APICURIO_VERSION (see the output above)"
  tar xzf "$APICURIO_DIR/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$app"
  rm -f "$APICURIO_DIR/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
  touch "$app/.complete"
fi
