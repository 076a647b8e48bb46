'use strict'
// Which prebuilt addon this machine needs: its napi-rs platform name (`linux-x64-gnu`), the
// file name `napi build --platform` gives the addon, and the npm package that ships it.
function abi() {
  if (process.platform !== 'linux') return ''
  const report = process.report && process.report.getReport ? process.report.getReport() : null
  const glibc = report && report.header && report.header.glibcVersionRuntime
  return glibc ? '-gnu' : '-musl'
}

function platformName() {
  const suffix = process.platform === 'win32' ? '-msvc' : abi()
  return `${process.platform}-${process.arch}${suffix}`
}

function addonFile() {
  return `herdless.${platformName()}.node`
}

function platformPackage() {
  return `herdless-${platformName()}`
}

module.exports = { addonFile, platformName, platformPackage }
